"""Chat Completions dialect: request bodies from turns, and recorded streams reduced to blocks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from engines_support import fixture_events, from_provider, reduce, shape, sse_events

from geppetto import Block, ProviderError, RateLimitError, StreamError, Turn
from geppetto.events import Usage
from geppetto.providers._streaming import ToolSpec
from geppetto.providers.openai_chat import (
    ChatStreamReducer,
    build_messages,
    build_request,
    chat_stop_reason,
    chat_usage,
)

WEATHER = ToolSpec("get_weather", "Weather for a city", {"type": "object", "properties": {"city": {"type": "string"}}})


def tool_turn() -> Turn:
    turn = Turn()
    turn.extend(
        [
            Block.system("You are terse."),
            Block.user("Weather in Paris and Tokyo?"),
            from_provider(Block.reasoning("need two calls"), "openai_chat"),
            Block.llm_text("Checking."),
            Block.tool_call("call_1", "get_weather", {"city": "Paris"}),
            Block.tool_call("call_2", "get_weather", {"city": "Tokyo"}),
            Block.tool_use("call_1", "18C"),
            Block.tool_use("call_2", {"temp": 25}, error="sensor offline"),
        ]
    )
    return turn


def test_messages_for_a_tool_loop_group_calls_and_answer_each_id() -> None:
    assert build_messages(tool_turn()) == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris and Tokyo?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Tokyo"}'},
                },
            ],
            "reasoning_content": "need two calls",
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "call_2", "content": '{"error": "sensor offline", "result": {"temp": 25}}'},
    ]


def test_chat_reasoning_is_replayed_in_every_exchange_that_called_tools_and_only_there() -> None:
    turn = Turn()
    turn.extend(
        [
            Block.user("first"),
            from_provider(Block.reasoning("plain answer thinking"), "openai_chat"),  # no tools: not sent
            from_provider(Block.llm_text("one"), "openai_chat"),
            Block.user("second"),
            from_provider(Block.reasoning("call thinking"), "openai_chat"),  # tools: sent in all later requests
            from_provider(Block.tool_call("call_1", "lookup", {"q": "x"}), "openai_chat"),
            Block.tool_use("call_1", "found"),
            from_provider(Block.reasoning("answer thinking"), "openai_chat"),
            from_provider(Block.llm_text("two"), "openai_chat"),
            Block.user("third"),
            from_provider(Block.reasoning("claude thought", signature="sig"), "anthropic"),
            from_provider(Block.reasoning(item_id="rs_1", encrypted_content="gAAAA"), "openai_responses"),
            Block.tool_call("toolu_1", "lookup", "{not json"),
        ]
    )
    assert build_messages(turn) == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "second"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": '{"q": "x"}'}}
            ],
            "reasoning_content": "call thinking",
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "found"},
        {"role": "assistant", "content": "two", "reasoning_content": "answer thinking"},
        {"role": "user", "content": "third"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "lookup", "arguments": "{not json"}}
            ],
        },
    ]


def test_user_images_become_content_parts() -> None:
    turn = Turn()
    turn.append(
        Block.user(
            "What is this?",
            images=[{"url": "https://example.test/cat.png"}, {"data": "iVBOR", "media_type": "image/png"}],
        )
    )
    assert build_messages(turn) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "https://example.test/cat.png"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
            ],
        }
    ]


def test_request_body_carries_tools_choice_and_limits() -> None:
    turn = Turn()
    turn.append(Block.user("hi"))
    body = build_request(
        turn,
        model="gpt-4o-mini",
        tools=[WEATHER],
        tool_choice="get_weather",
        temperature=0.2,
        max_tokens=100,
        max_tokens_field="max_completion_tokens",
        reasoning_effort="low",
    )
    assert body == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather for a city",
                    "parameters": WEATHER.parameters,
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "temperature": 0.2,
        "max_completion_tokens": 100,
        "reasoning_effort": "low",
    }


def test_fragmented_parallel_tool_calls_accumulate_by_index() -> None:
    deltas, result = reduce(ChatStreamReducer(), fixture_events("chat_tool_calls_fragmented.sse"))
    assert deltas == []
    assert shape(result.blocks) == [
        ("tool_call", {"id": "call_OTNdB9zMnNa1V7U8G5Omt7Jr", "name": "get_weather", "args": {"city": "Paris"}}),
        ("tool_call", {"id": "call_9xYzQ2wErTy4UiOp1AsDfGhJ", "name": "get_weather", "args": {"city": "Tokyo"}}),
    ]
    assert result.stop_reason == "tool_calls"
    assert result.usage == Usage(input_tokens=82, output_tokens=47, cached_tokens=64, reasoning_tokens=0)
    assert result.response_id == "chatcmpl-A1b2C3"


def test_deepseek_reasoning_content_becomes_a_reasoning_block() -> None:
    deltas, result = reduce(ChatStreamReducer(), fixture_events("chat_deepseek_reasoning.sse"))
    assert deltas == [
        ("reasoning", "Two plus two "),
        ("reasoning", "is four."),
        ("text", "The answer"),
        ("text", " is 4."),
    ]
    assert shape(result.blocks) == [
        ("reasoning", {"text": "Two plus two is four."}),
        ("llm_text", {"text": "The answer is 4."}),
    ]
    assert (result.stop_reason, result.usage) == ("end_turn", Usage(12, 30, 0, 22))


def test_a_stream_cut_mid_tool_call_raises_and_yields_no_block() -> None:
    events = fixture_events("chat_tool_calls_fragmented.sse")[:2]  # first call half sent
    reducer = ChatStreamReducer()
    for event in events:
        reducer.feed(event)
    with pytest.raises(StreamError, match="ended before a finish_reason") as info:
        reducer.result()
    assert "unfinished tool calls (get_weather)" in str(info.value)
    assert reducer.completed_blocks() == []


def test_an_error_chunk_raises_with_the_provider_message() -> None:
    events = sse_events(
        'data: {"error": {"message": "Rate limit reached for gpt-4o", "type": "requests", "code": 429}}\n\n'
    )
    with pytest.raises(RateLimitError, match="Rate limit reached for gpt-4o"):
        ChatStreamReducer().feed(events[0])
    with pytest.raises(ProviderError):
        ChatStreamReducer().feed(sse_events('data: {"error": {"message": "boom"}}\n\n')[0])


def test_malformed_chunk_is_a_stream_error() -> None:
    with pytest.raises(StreamError, match="malformed chunk"):
        ChatStreamReducer().feed(sse_events("data: {oops\n\n")[0])


@pytest.mark.parametrize(
    ("finish", "calls", "expected"),
    [
        ("stop", False, "end_turn"),
        ("stop", True, "tool_calls"),
        ("length", False, "max_tokens"),
        ("tool_calls", True, "tool_calls"),
        ("content_filter", False, "content_filter"),
        ("weird", False, "other"),
    ],
)
def test_finish_reasons_map_to_the_shared_vocabulary(finish: str, calls: bool, expected: str) -> None:
    assert chat_stop_reason(finish, calls) == expected


@pytest.mark.parametrize(
    ("model", "sent"),
    [("gpt-4o-mini", True), ("o3-mini", False), ("o1", False), ("gpt-5", False), ("openai/gpt-5-mini", False)],
)
def test_temperature_is_left_out_for_openai_reasoning_models(model: str, sent: bool) -> None:
    turn = Turn()
    turn.append(Block.user("hi"))
    body = build_request(turn, model=model, tools=[], temperature=0.2)
    assert ("temperature" in body) is sent


def chunk(*calls: dict[str, Any], finish: str | None = None) -> str:
    delta = {"tool_calls": list(calls)} if calls else {}
    return (
        "data: " + json.dumps({"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"
    )


def test_a_fragment_with_a_null_index_is_a_stream_error() -> None:
    start = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    reducer = ChatStreamReducer()
    reducer.feed(sse_events(chunk(start))[0])
    more = {"index": None, "function": {"arguments": '{"city": "Paris"}'}}
    with pytest.raises(StreamError, match="tool call fragment with index None") as info:
        reducer.feed(sse_events(chunk(more))[0])
    assert "unfinished tool calls (get_weather)" in str(info.value)


def test_whole_calls_without_an_index_each_start_a_call() -> None:
    first = {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    second = {"index": None, "id": "call_b", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    text = chunk(first) + chunk(second) + chunk(finish="tool_calls") + "data: [DONE]\n\n"
    _, result = reduce(ChatStreamReducer(), sse_events(text))
    assert shape(result.blocks) == [
        ("tool_call", {"id": "call_a", "name": "get_weather", "args": {"city": "Paris"}}),
        ("tool_call", {"id": "call_b", "name": "get_weather", "args": {}}),
    ]


def test_deepseek_cache_hits_count_as_cached_tokens() -> None:
    raw = {
        "prompt_tokens": 374,
        "completion_tokens": 61,
        "prompt_cache_hit_tokens": 256,
        "prompt_cache_miss_tokens": 118,
    }
    assert chat_usage(raw) == Usage(input_tokens=374, output_tokens=61, cached_tokens=256)
