"""Gemini dialect: request bodies from turns, and recorded streams reduced to blocks."""

from __future__ import annotations

from typing import Any

import pytest
from engines_support import fixture_events, from_provider, reduce, shape, sse_events

from geppetto import Block, RateLimitError, StreamError, Turn
from geppetto.events import Usage
from geppetto.providers._streaming import ToolSpec
from geppetto.providers.gemini import (
    FOREIGN_CALL_SIGNATURE,
    GeminiEngine,
    GeminiStreamReducer,
    build_request,
    gemini_stop_reason,
    model_path,
    needs_signed_calls,
)
from geppetto.turns import PAYLOAD_THOUGHT_SIGNATURE

WEATHER = ToolSpec("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}})


def signed(block: Block, signature: str) -> Block:
    block.payload[PAYLOAD_THOUGHT_SIGNATURE] = signature
    return from_provider(block, "gemini")


def test_contents_alternate_and_function_responses_take_the_call_name() -> None:
    turn = Turn()
    turn.extend(
        [
            Block.system("Be brief."),
            Block.user("Weather in Paris and Tokyo?"),
            signed(Block.reasoning("thinking about it"), "sig-thought"),
            signed(Block.tool_call("fc_1", "get_weather", {"city": "Paris"}), "sig-call"),
            from_provider(Block.tool_call("fc_2", "get_weather", {"city": "Tokyo"}), "gemini"),
            Block.tool_use("fc_1", "18C"),
            Block.tool_use("fc_2", "", error="timeout"),
            signed(Block.llm_text("Paris 18C."), "sig-text"),
        ]
    )
    body = build_request(turn, tools=[WEATHER], tool_choice="auto", temperature=0.1, max_tokens=256)
    assert body == {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Weather in Paris and Tokyo?"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "thinking about it", "thought": True, "thoughtSignature": "sig-thought"},
                    {
                        "functionCall": {"id": "fc_1", "name": "get_weather", "args": {"city": "Paris"}},
                        "thoughtSignature": "sig-call",
                    },
                    {"functionCall": {"id": "fc_2", "name": "get_weather", "args": {"city": "Tokyo"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"id": "fc_1", "name": "get_weather", "response": {"output": "18C"}}},
                    {"functionResponse": {"id": "fc_2", "name": "get_weather", "response": {"error": "timeout"}}},
                ],
            },
            {"role": "model", "parts": [{"text": "Paris 18C.", "thoughtSignature": "sig-text"}]},
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "get_weather", "description": "Weather", "parametersJsonSchema": WEATHER.parameters}
                ]
            }
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
        "generationConfig": {"temperature": 0.1, "maxOutputTokens": 256},
    }


def test_calls_from_other_providers_get_the_documented_placeholder_and_foreign_reasoning_is_dropped() -> None:
    turn = Turn()
    turn.extend(
        [
            Block.user("Weather?"),
            from_provider(Block.reasoning("claude thinking", signature="anthropic-sig"), "anthropic"),
            from_provider(Block.tool_call("toolu_9", "get_weather", {"city": "Oslo"}), "anthropic"),
            Block.tool_use("toolu_9", {"temp": -3}),
        ]
    )
    body = build_request(turn, tools=[WEATHER], tool_choice="get_weather", thinking_budget=-1, sign_calls=True)
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Weather?"}]},
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"id": "toolu_9", "name": "get_weather", "args": {"city": "Oslo"}},
                    "thoughtSignature": FOREIGN_CALL_SIGNATURE,
                }
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "toolu_9", "name": "get_weather", "response": {"output": {"temp": -3}}}}
            ],
        },
    ]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}}
    assert body["generationConfig"] == {"thinkingConfig": {"thinkingBudget": -1, "includeThoughts": True}}


def test_unsigned_calls_are_sent_as_they_are_when_no_signature_is_needed() -> None:
    turn = Turn()
    turn.extend([Block.user("hi"), Block.tool_call("call_1", "get_weather", {}), Block.tool_use("call_1", "ok")])
    assert build_request(turn, tools=[])["contents"][1] == {
        "role": "model",
        "parts": [{"functionCall": {"id": "call_1", "name": "get_weather", "args": {}}}],
    }


@pytest.mark.parametrize(
    ("model", "budget", "needed"),
    [
        ("gemini-3-pro-preview", None, True),
        ("models/gemini-3-flash", 0, True),
        ("gemini-2.5-flash", -1, True),
        ("sim-1", 1024, True),
        ("gemini-2.5-flash", None, False),
        ("gemini-2.5-flash", 0, False),
    ],
)
def test_gemini_3_and_thinking_need_signed_calls(model: str, budget: int | None, needed: bool) -> None:
    assert needs_signed_calls(model, budget) is needed


def call(call_id: str, provider: str, signature: str = "") -> Block:
    block = from_provider(Block.tool_call(call_id, "get_weather", {"city": call_id}), provider)
    if signature:
        block.payload[PAYLOAD_THOUGHT_SIGNATURE] = signature
    return block


def test_only_the_current_turns_steps_get_the_placeholder_on_their_first_call() -> None:
    turn = Turn()
    turn.extend(
        [
            Block.user("Weather in Paris and Rome?"),
            call("old_1", "openai_responses"),
            call("old_2", "openai_responses"),
            Block.tool_use("old_1", "18C"),
            Block.tool_use("old_2", "20C"),
            from_provider(Block.llm_text("18C and 20C."), "openai_responses"),
            Block.user("And Oslo, Tokyo, Lima?"),  # the current turn starts here
            call("cur_1", "anthropic"),
            call("cur_2", "anthropic"),
            Block.tool_use("cur_1", "-3C"),
            Block.tool_use("cur_2", "25C"),
            call("own_1", "gemini"),  # Gemini's own call made without thinking: unsigned
            Block.tool_use("own_1", "15C"),
            call("own_2", "gemini", signature="real-sig"),
            Block.tool_use("own_2", "16C"),
        ]
    )
    contents = build_request(turn, tools=[], sign_calls=True)["contents"]
    signatures = [
        (p["functionCall"]["id"], p.get("thoughtSignature"))
        for c in contents
        for p in c["parts"]
        if "functionCall" in p
    ]
    assert signatures == [
        ("old_1", None),  # an earlier turn is not checked
        ("old_2", None),
        ("cur_1", FOREIGN_CALL_SIGNATURE),  # the first call of a step carries the signature...
        ("cur_2", None),  # ...parallel calls after it need none
        ("own_1", FOREIGN_CALL_SIGNATURE),
        ("own_2", "real-sig"),  # a real signature is never replaced
    ]


def test_function_responses_alone_do_not_start_a_new_turn() -> None:
    turn = Turn()
    turn.extend([Block.user("hi"), call("c1", "anthropic"), Block.tool_use("c1", "ok"), call("c2", "anthropic")])
    contents = build_request(turn, tools=[], sign_calls=True)["contents"]
    assert [p.get("thoughtSignature") for c in contents for p in c["parts"] if "functionCall" in p] == [
        FOREIGN_CALL_SIGNATURE,
        FOREIGN_CALL_SIGNATURE,
    ]
    turn.append(Block.user("thanks"))
    contents = build_request(turn, tools=[], sign_calls=True)["contents"]
    assert [p.get("thoughtSignature") for c in contents for p in c["parts"] if "functionCall" in p] == [None, None]


def test_model_path_adds_the_models_prefix_once() -> None:
    assert (model_path("gemini-2.5-flash"), model_path("models/gemini-2.5-flash")) == (
        "models/gemini-2.5-flash",
        "models/gemini-2.5-flash",
    )


def test_function_call_stream_keeps_thoughts_and_the_signature() -> None:
    deltas, result = reduce(GeminiStreamReducer(), fixture_events("gemini_function_call.sse"))
    assert deltas == [
        ("reasoning", "The user wants the weather in Paris; "),
        ("reasoning", "I should call get_weather."),
    ]
    assert shape(result.blocks) == [
        ("reasoning", {"text": "The user wants the weather in Paris; I should call get_weather."}),
        (
            "tool_call",
            {
                "id": "fc_7h2k",
                "name": "get_weather",
                "args": {"city": "Paris"},
                "thought_signature": "CiQB0e2Kb8nq3Yp4VYxZmWJkQ0E=",
            },
        ),
    ]
    assert result.stop_reason == "tool_calls"
    assert result.usage == Usage(input_tokens=40, output_tokens=37, cached_tokens=16, reasoning_tokens=25)
    assert result.response_id == "Xk9aZbqLJ4Kx"


def test_text_stream_merges_chunks_and_keeps_a_trailing_signature() -> None:
    deltas, result = reduce(GeminiStreamReducer(), fixture_events("gemini_text.sse"))
    assert deltas == [("text", "Hello"), ("text", ", world"), ("text", "!")]
    assert shape(result.blocks) == [("llm_text", {"text": "Hello, world!", "thought_signature": "c2lnLXRleHQ="})]
    assert (result.stop_reason, result.usage) == ("end_turn", Usage(input_tokens=5, output_tokens=4))


def test_a_stream_without_finish_reason_raises_and_runs_no_call() -> None:
    reducer = GeminiStreamReducer()
    for event in fixture_events("gemini_function_call.sse")[:2]:
        reducer.feed(event)
    with pytest.raises(StreamError, match="before a finishReason"):
        reducer.result()
    assert reducer.completed_blocks() == []


def test_an_error_chunk_raises_with_googles_message() -> None:
    event = sse_events(
        'data: {"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}}\n\n'
    )[0]
    with pytest.raises(RateLimitError, match="Resource has been exhausted"):
        GeminiStreamReducer().feed(event)


def test_a_blocked_prompt_finishes_as_content_filter() -> None:
    event = sse_events(
        'data: {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 3}}\n\n'
    )[0]
    _, result = reduce(GeminiStreamReducer(), [event])
    assert (result.blocks, result.stop_reason) == ([], "content_filter")


@pytest.mark.parametrize(
    ("raw", "calls", "expected"),
    [
        ("STOP", False, "end_turn"),
        ("STOP", True, "tool_calls"),
        ("MAX_TOKENS", False, "max_tokens"),
        ("SAFETY", False, "content_filter"),
        ("RECITATION", False, "content_filter"),
        ("MALFORMED_FUNCTION_CALL", False, "other"),
    ],
)
def test_finish_reasons_map_to_the_shared_vocabulary(raw: str, calls: bool, expected: str) -> None:
    assert gemini_stop_reason(raw, calls) == expected


def test_the_engine_signs_when_thinking_is_on_or_the_model_is_gemini_3() -> None:
    turn = Turn()
    turn.extend([Block.user("hi"), call("c1", "openai_chat"), Block.tool_use("c1", "ok")])

    def first_call(engine: GeminiEngine) -> dict[str, Any]:
        part: dict[str, Any] = engine.build_request(turn)["contents"][1]["parts"][0]
        return part

    assert "thoughtSignature" not in first_call(GeminiEngine("gemini-2.5-flash", api_key="k"))
    assert first_call(GeminiEngine("gemini-2.5-flash", api_key="k", thinking_budget=-1))["thoughtSignature"] == (
        FOREIGN_CALL_SIGNATURE
    )
    assert first_call(GeminiEngine("gemini-3-pro-preview", api_key="k"))["thoughtSignature"] == FOREIGN_CALL_SIGNATURE
