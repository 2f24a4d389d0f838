"""Request bodies validate against the official SDKs' request types (openai and anthropic TypedDicts).

pydantic validates ``Iterable`` fields lazily, so ``consume`` drains them. The TypedDicts ignore unknown
keys, so exact shapes are pinned by the whole-body tests in the dialect test files; these tests catch
wrong types, missing required fields and wrong literals.
"""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types.message_create_params import MessageCreateParamsStreaming
from engines_support import consume, from_provider
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from pydantic import TypeAdapter, ValidationError

from geppetto import Block, Turn
from geppetto.providers._streaming import ToolSpec
from geppetto.providers.anthropic import build_request as claude_request
from geppetto.providers.openai_chat import build_request as chat_request

CHAT = TypeAdapter(CompletionCreateParamsStreaming)
CLAUDE = TypeAdapter(MessageCreateParamsStreaming)
WEATHER = ToolSpec("get_weather", "Weather", {"type": "object", "properties": {"city": {"type": "string"}}})


def cross_provider_turn() -> Turn:
    """A conversation that went through four providers, with tools, reasoning and images."""
    turn = Turn()
    turn.extend(
        [
            Block.system("Be brief."),
            Block.user("Weather in Paris?", images=[{"url": "https://example.test/map.png"}]),
            from_provider(Block.reasoning(item_id="rs_1", encrypted_content="gAAAA", summary=[]), "openai_responses"),
            from_provider(Block.tool_call("call_1", "get_weather", {"city": "Paris"}), "openai_responses"),
            Block.tool_use("call_1", "18C"),
            from_provider(Block.reasoning("ok", signature="sig"), "anthropic"),
            from_provider(Block.llm_text("18C."), "anthropic"),
            Block.user("And Tokyo and Oslo?"),
            from_provider(Block.tool_call("fc_2", "get_weather", {"city": "Tokyo"}), "gemini"),
            from_provider(Block.tool_call("fc_3", "get_weather", {"city": "Oslo"}), "gemini"),
            Block.tool_use("fc_2", {"temp": 25}),
            Block.tool_use("fc_3", "", error="timeout"),
            from_provider(Block.reasoning("thinking"), "openai_chat"),
            from_provider(Block.llm_text("Tokyo 25C, Oslo unknown."), "openai_chat"),
            Block.user("Thanks!", images=[{"data": "iVBOR", "media_type": "image/png"}]),
        ]
    )
    return turn


def validate(adapter: TypeAdapter[Any], body: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = consume(adapter.validate_python(body))
    return result


def test_chat_request_validates_against_the_openai_sdk_params() -> None:
    body = chat_request(
        cross_provider_turn(),
        model="gpt-4o-mini",
        tools=[WEATHER],
        tool_choice="get_weather",
        temperature=0.2,
        max_tokens=64,
        max_tokens_field="max_completion_tokens",
        reasoning_effort="low",
    )
    validated = validate(CHAT, body)
    assert [m["role"] for m in validated["messages"]] == [
        "system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "tool", "assistant", "user",
    ]  # fmt: skip


def test_claude_request_validates_against_the_anthropic_sdk_params() -> None:
    for thinking in (None, 1024):
        body = claude_request(
            cross_provider_turn(),
            model="claude-sonnet-4",
            tools=[WEATHER],
            tool_choice="auto",
            thinking_budget=thinking,
        )
        validated = validate(CLAUDE, body)
        roles = [m["role"] for m in validated["messages"]]
        assert roles == ["user", "assistant"] * 4 + ["user"]


def test_the_validators_do_reject_a_wrong_body() -> None:
    """Guards the conformance tests themselves: a bad literal deep inside must fail."""
    body = claude_request(cross_provider_turn(), model="m", tools=[])
    body["messages"][1]["content"][0]["type"] = "tool_call"
    with pytest.raises(ValidationError):
        validate(CLAUDE, body)
    chat = chat_request(cross_provider_turn(), model="m", tools=[])
    chat["messages"][2]["tool_calls"][0]["type"] = "func"
    with pytest.raises(ValidationError):
        validate(CHAT, chat)
