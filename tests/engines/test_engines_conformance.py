"""Request bodies validate against the official SDKs' request types: the openai and anthropic TypedDicts
(types, required fields, literals, and no key they do not declare) and google-genai's models.

Bodies built from a cross-provider turn are checked here, and so is every body the engines really sent
to the simulator in a tool loop with reasoning (see ``conformance_support``).
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_support import CHAT, CLAUDE, check_chat, check_claude, check_gemini, check_sent
from engines_support import consume, from_provider
from pydantic import ValidationError

from geppetto import Block, Turn
from geppetto.middleware import tool_loop, with_middleware
from geppetto.providers._streaming import ToolSpec
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.anthropic import build_request as claude_request
from geppetto.providers.gemini import GeminiEngine
from geppetto.providers.gemini import build_request as gemini_request
from geppetto.providers.openai_chat import ChatEngine
from geppetto.providers.openai_chat import build_request as chat_request
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.tools import ToolRegistry

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
            Block.user("Thanks!", images=[{"data": "iVBORw0KGgo=", "media_type": "image/png"}]),
        ]
    )
    return turn


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
    validated = check_chat(body)
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
        validated = check_claude(body)
        roles = [m["role"] for m in validated["messages"]]
        assert roles == ["user", "assistant"] * 4 + ["user"]


def test_the_validators_do_reject_a_wrong_body() -> None:
    """Guards the conformance tests themselves: a bad literal deep inside must fail."""
    body = claude_request(cross_provider_turn(), model="m", tools=[])
    body["messages"][1]["content"][0]["type"] = "tool_call"
    with pytest.raises(ValidationError):
        consume(CLAUDE.validate_python(body))
    chat = chat_request(cross_provider_turn(), model="m", tools=[])
    chat["messages"][2]["tool_calls"][0]["type"] = "func"
    with pytest.raises(ValidationError):
        consume(CHAT.validate_python(chat))


def test_gemini_request_validates_against_the_google_genai_models() -> None:
    for thinking, sign in ((None, False), (-1, True)):
        body = gemini_request(
            cross_provider_turn(),
            tools=[WEATHER],
            tool_choice="get_weather",
            temperature=0.2,
            max_tokens=64,
            thinking_budget=thinking,
            sign_calls=sign,
        )
        check_gemini(body)
        assert [c["role"] for c in body["contents"]] == ["user", "model"] * 4 + ["user"]


@pytest.mark.parametrize(
    ("build", "check", "spoil"),
    [
        (lambda t: chat_request(t, model="m", tools=[WEATHER]), check_chat, lambda b: b["tools"][0]["function"]),
        (
            lambda t: claude_request(t, model="m", tools=[WEATHER]),
            check_claude,
            lambda b: b["messages"][1]["content"][0],
        ),
        (lambda t: gemini_request(t, tools=[WEATHER]), check_gemini, lambda b: b["contents"][1]["parts"][0]),
    ],
    ids=["chat", "claude", "gemini"],
)
def test_a_key_the_sdk_does_not_declare_is_caught(build: Any, check: Any, spoil: Any) -> None:
    body = build(cross_provider_turn())
    check(body)
    spoil(body)["strictt"] = True
    with pytest.raises((AssertionError, ValidationError), match="strictt"):
        check(body)


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C in {city}"


@pytest.mark.parametrize(
    "make",
    [
        lambda sim: ChatEngine("sim-1", "sk-test", sim.openai_url, temperature=0.3),
        lambda sim: ClaudeEngine("sim-1", "sk-ant", sim.url, thinking_budget=1024),
        lambda sim: GeminiEngine(
            "sim-1", "g-key", sim.url, temperature=0.3
        ),  # thinking: see test_engines_cross_provider
    ],
    ids=["chat", "claude", "gemini"],
)
async def test_the_bodies_the_engines_send_in_a_tool_loop_conform(make: Any, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(
        Reply(
            reasoning="Two calls.",
            tool_calls=[ToolCall("get_weather", {"city": "Paris"}), ToolCall("get_weather", {"city": "Oslo"})],
        ),
        Reply(reasoning="Answer.", text="18C in both."),
    )
    turn = Turn()
    turn.extend(  # the turn so far came from other providers (no fake signature: the simulator checks them)
        [
            Block.system("Be brief."),
            Block.user("Weather in Rome?", images=[{"data": "iVBORw0KGgo=", "media_type": "image/png"}]),
            from_provider(Block.reasoning(item_id="rs_1", encrypted_content="gAAAA", summary=[]), "openai_responses"),
            from_provider(Block.tool_call("call_1", "get_weather", {"city": "Rome"}), "openai_responses"),
            Block.tool_use("call_1", "20C"),
            from_provider(Block.llm_text("20C."), "openai_responses"),
            Block.user("Weather in Paris and Oslo?"),
        ]
    )
    out = await with_middleware(make(geppetto_sim), tool_loop(ToolRegistry([get_weather]))).run_inference(turn)
    assert out.blocks[-1].text == "18C in both." and len(geppetto_sim.requests) == 2
    for request in geppetto_sim.requests:
        check_sent(request.path, request.body)


def test_openai_itself_never_gets_reasoning_content() -> None:
    """reasoning_content is a compatible servers' extension: OpenAI's types do not have it."""
    official = ChatEngine("gpt-4o-mini", api_key="k").build_request(cross_provider_turn())
    check_chat(official, extensions=False)
    compatible = ChatEngine("deepseek-v4-flash", api_key="k", base_url="https://api.deepseek.test/v1")
    body = compatible.build_request(cross_provider_turn())
    assert [m.get("reasoning_content") for m in body["messages"] if m["role"] == "assistant"][-1] == "thinking"
    with pytest.raises(AssertionError, match="reasoning_content"):
        check_chat(body, extensions=False)
