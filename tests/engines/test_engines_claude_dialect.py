"""Anthropic Messages dialect: request bodies from turns, and recorded streams reduced to blocks."""

from __future__ import annotations

import json

import pytest
from engines_support import fixture_events, from_provider, reduce, shape, sse_events

from geppetto import (
    AuthenticationError,
    BadRequestError,
    Block,
    ConfigurationError,
    ProviderError,
    ServerError,
    StreamError,
    Turn,
)
from geppetto.events import Usage
from geppetto.providers._streaming import ToolSpec
from geppetto.providers.anthropic import ClaudeStreamReducer, build_request, claude_stop_reason

WEATHER = ToolSpec("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}})


def test_blocks_merge_into_alternating_turns_with_results_first() -> None:
    turn = Turn()
    turn.extend(
        [
            Block.system("Be brief."),
            Block.user("Weather?"),
            Block.user("In Paris and Tokyo."),
            from_provider(Block.reasoning("two calls", signature="sig-1"), "anthropic"),
            Block.llm_text("Checking."),
            Block.tool_call("toolu_1", "get_weather", {"city": "Paris"}),
            Block.tool_call("call.2", "get_weather", {"city": "Tokyo"}),
            Block.user("also: hurry"),
            Block.tool_use("toolu_1", "18C"),
            Block.tool_use("call.2", "", error="timeout"),
            Block.system("Answer in French."),
        ]
    )
    body = build_request(turn, model="claude-sonnet-4", tools=[WEATHER], tool_choice="required", temperature=0.5)
    assert body == {
        "model": "claude-sonnet-4",
        "max_tokens": 4096,
        "stream": True,
        "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Answer in French."}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Weather?"}, {"type": "text", "text": "In Paris and Tokyo."}],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "two calls", "signature": "sig-1"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Tokyo"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_2",
                        "content": '{"error": "timeout"}',
                        "is_error": True,
                    },
                    {"type": "text", "text": "also: hurry"},
                ],
            },
        ],
        "tools": [{"name": "get_weather", "description": "Weather", "input_schema": WEATHER.parameters}],
        "tool_choice": {"type": "any"},
        "temperature": 0.5,
    }


def test_reasoning_claude_cannot_take_is_left_out_but_kept_in_the_turn() -> None:
    turn = Turn()
    turn.extend(
        [
            Block.user("hi"),
            from_provider(Block.reasoning(item_id="rs_1", encrypted_content="gAAAA"), "openai_responses"),
            from_provider(Block.reasoning("unsigned thinking"), "anthropic"),
            from_provider(Block.reasoning(encrypted_content="redacted-data"), "anthropic"),
            Block.llm_text("hello"),
        ]
    )
    before = turn.clone()
    body = build_request(turn, model="m", tools=[])
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [{"type": "redacted_thinking", "data": "redacted-data"}, {"type": "text", "text": "hello"}],
        },
    ]
    assert turn == before


def test_thinking_is_switched_off_when_the_continued_calls_have_no_thinking() -> None:
    turn = Turn()
    turn.extend(
        [
            Block.user("weather?"),
            from_provider(Block.tool_call("call_1", "get_weather", {"city": "Paris"}), "openai_chat"),
            Block.tool_use("call_1", "18C"),
        ]
    )
    body = build_request(turn, model="m", tools=[WEATHER], thinking_budget=2048, temperature=0.3)
    assert "thinking" not in body
    assert body["temperature"] == 0.3
    turn.extend([Block.llm_text("18C in Paris."), Block.user("thanks, and now?")])
    body = build_request(turn, model="m", tools=[WEATHER], thinking_budget=2048, temperature=0.3)
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 4096 + 2048
    assert "temperature" not in body


def test_thinking_stream_keeps_the_signature_and_cache_usage() -> None:
    deltas, result = reduce(ClaudeStreamReducer(), fixture_events("anthropic_thinking.sse"))
    assert deltas == [("reasoning", "The user wants 2+2. "), ("reasoning", "That is 4."), ("text", "2 + 2 = 4.")]
    assert shape(result.blocks) == [
        (
            "reasoning",
            {
                "text": "The user wants 2+2. That is 4.",
                "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
            },
        ),
        ("llm_text", {"text": "2 + 2 = 4."}),
    ]
    assert result.usage == Usage(input_tokens=170, output_tokens=42, cached_tokens=100, cache_write_tokens=20)
    assert result.stop_reason == "end_turn"


def test_a_stream_cut_mid_tool_input_keeps_only_complete_non_tool_blocks() -> None:
    events = fixture_events("anthropic_tool_use_response.sse")
    cut = events[: next(i for i, e in enumerate(events) if 'is\\"}' in e.data)]  # the input JSON half sent
    reducer = ClaudeStreamReducer()
    for event in cut:
        reducer.feed(event)
    with pytest.raises(StreamError, match="before message_stop") as info:
        reducer.result()
    assert "unfinished tool calls (get_weather)" in str(info.value)
    assert shape(reducer.completed_blocks()) == [
        ("llm_text", {"text": "I'll check the current weather in Paris for you."})
    ]


def test_an_overloaded_error_event_raises_server_error() -> None:
    event = sse_events(
        'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )[0]
    with pytest.raises(ServerError, match="Overloaded") as info:
        ClaudeStreamReducer().feed(event)
    assert (info.value.status, info.value.error_type) == (529, "overloaded_error")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("end_turn", "end_turn"),
        ("stop_sequence", "end_turn"),
        ("max_tokens", "max_tokens"),
        ("tool_use", "tool_calls"),
        ("pause_turn", "pause_turn"),
        ("refusal", "refusal"),
        ("model_context_window_exceeded", "max_tokens"),
        (None, "other"),
    ],
)
def test_stop_reasons_map_to_the_shared_vocabulary(raw: str | None, expected: str) -> None:
    assert claude_stop_reason(raw) == expected


def test_thinking_with_a_forced_tool_names_the_fix() -> None:
    turn = Turn()
    turn.append(Block.user("hi"))
    with pytest.raises(ConfigurationError, match="use tool_choice='auto' or drop thinking_budget"):
        build_request(turn, model="m", tools=[WEATHER], tool_choice="required", thinking_budget=1024)


@pytest.mark.parametrize(
    ("etype", "cls", "status"),
    [
        ("billing_error", ProviderError, 402),
        ("request_too_large", BadRequestError, 413),
        ("timeout_error", ServerError, 504),
        ("permission_error", AuthenticationError, 403),
        ("overloaded_error", ServerError, 529),
    ],
)
def test_error_events_map_like_their_http_status(etype: str, cls: type[ProviderError], status: int) -> None:
    data = json.dumps({"type": "error", "error": {"type": etype, "message": "details"}, "request_id": "req_1"})
    with pytest.raises(ProviderError) as info:
        ClaudeStreamReducer().feed(sse_events(f"event: error\ndata: {data}\n\n")[0])
    assert type(info.value) is cls
    assert (info.value.status, info.value.error_type, info.value.request_id) == (status, etype, "req_1")
