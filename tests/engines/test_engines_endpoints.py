"""The three engines over an in-process HTTP mock: URLs, headers, keys, events and turn metadata."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from engines_support import stream_text

from geppetto import AuthenticationError, Block, ConfigurationError, NotFoundError, StreamError, Turn, UsageError
from geppetto.events import (
    Event,
    EventError,
    EventFinal,
    EventReasoningDelta,
    EventStart,
    EventTextDelta,
    EventToolCallRequested,
    Usage,
    with_sinks,
)
from geppetto.middleware import tool_loop, with_middleware
from geppetto.pricing import TURN_META_COST
from geppetto.providers._http import HttpTransport
from geppetto.providers._retry import RetryPolicy
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine
from geppetto.providers.openai_chat import ChatEngine
from geppetto.tools import ToolRegistry
from geppetto.turns import (
    BLOCK_META_PROVIDER,
    BLOCK_META_RESPONSE_ID,
    TURN_META_MODEL,
    TURN_META_PROVIDER,
    TURN_META_STOP_REASON,
    TURN_META_USAGE,
)

Recorded = list[httpx.Request]


def mock(fixture: str, seen: Recorded, *, status: int = 200, body: str | None = None) -> httpx.AsyncClient:
    text = body if body is not None else stream_text(fixture)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, text=text, headers={"content-type": "text/event-stream"})

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def user_turn(text: str = "Weather in Paris?") -> Turn:
    turn = Turn()
    turn.append(Block.user(text))
    return turn


async def run(engine: Any, turn: Turn) -> tuple[Turn, list[Event]]:
    events: list[Event] = []
    with with_sinks(events.append):
        out = await engine.run_inference(turn)
    return out, events


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


async def test_chat_engine_posts_to_chat_completions_and_publishes_events() -> None:
    seen: Recorded = []
    engine = ChatEngine("gpt-4o-mini", api_key="sk-test", http=mock("chat_deepseek_reasoning.sse", seen))
    turn, events = await run(engine, user_turn())
    assert [str(r.url) for r in seen] == ["https://api.openai.com/v1/chat/completions"]
    assert seen[0].headers["authorization"] == "Bearer sk-test"
    assert json.loads(seen[0].content)["model"] == "gpt-4o-mini"
    assert [type(e) for e in events] == [
        EventStart, EventReasoningDelta, EventReasoningDelta, EventTextDelta, EventTextDelta, EventFinal,
    ]  # fmt: skip
    final = events[-1]
    assert isinstance(final, EventFinal)
    assert (final.text, final.metadata.stop_reason, final.metadata.usage) == (
        "The answer is 4.",
        "end_turn",
        Usage(12, 30, 0, 22),
    )
    assert [b.kind.value for b in turn.blocks] == ["user", "reasoning", "llm_text"]
    assert [BLOCK_META_PROVIDER.get(b.metadata) for b in turn.blocks[1:]] == ["openai_chat", "openai_chat"]
    assert BLOCK_META_RESPONSE_ID.get(turn.blocks[2].metadata) == "5f1c9a3e"
    meta = dict(turn.metadata)
    cost = meta.pop(str(TURN_META_COST), None)  # priced when genai-prices (the prices extra) is installed
    assert cost == final.metadata.cost and (cost is None or cost["total"] > 0)
    assert meta == {
        str(TURN_META_PROVIDER): "openai_chat",
        str(TURN_META_MODEL): "gpt-4o-mini",
        str(TURN_META_USAGE): Usage(12, 30, 0, 22).to_dict(),
        str(TURN_META_STOP_REASON): "end_turn",
    }


async def test_claude_engine_posts_messages_with_version_header_and_reports_tool_calls() -> None:
    seen: Recorded = []
    engine = ClaudeEngine("claude-sonnet-4", api_key="sk-ant", http=mock("anthropic_tool_use_response.sse", seen))
    turn, events = await run(engine, user_turn())
    assert str(seen[0].url) == "https://api.anthropic.com/v1/messages"
    assert (seen[0].headers["x-api-key"], seen[0].headers["anthropic-version"]) == ("sk-ant", "2023-06-01")
    calls = [e for e in events if isinstance(e, EventToolCallRequested)]
    assert [(c.call_id, c.name, c.args) for c in calls] == [
        ("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", {"location": "Paris"})
    ]
    assert [type(e) for e in events] == [EventStart, EventTextDelta, EventTextDelta, EventToolCallRequested, EventFinal]
    assert TURN_META_STOP_REASON.get(turn.metadata) == "tool_calls"
    assert [b.kind.value for b in turn.blocks] == ["user", "llm_text", "tool_call"]


async def test_gemini_engine_posts_stream_generate_content_with_alt_sse() -> None:
    seen: Recorded = []
    engine = GeminiEngine("gemini-2.5-flash", api_key="g-key", http=mock("gemini_function_call.sse", seen))
    turn, events = await run(engine, user_turn())
    assert str(seen[0].url) == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert seen[0].headers["x-goog-api-key"] == "g-key"
    assert [type(e) for e in events] == [
        EventStart,
        EventReasoningDelta,
        EventReasoningDelta,
        EventToolCallRequested,
        EventFinal,
    ]
    assert turn.blocks[-1].payload == {
        "id": "fc_7h2k",
        "name": "get_weather",
        "args": {"city": "Paris"},
        "thought_signature": "CiQB0e2Kb8nq3Yp4VYxZmWJkQ0E=",
    }


async def test_a_cut_stream_publishes_an_error_and_appends_no_tool_call() -> None:
    text = stream_text("anthropic_tool_use_response.sse")
    cut = text[: text.rindex("event:", 0, text.index('is\\"}'))]  # the tool input JSON half sent
    seen: Recorded = []
    engine = ClaudeEngine("claude-sonnet-4", api_key="k", http=mock("", seen, body=cut))
    turn = user_turn()
    events: list[Event] = []
    with with_sinks(events.append), pytest.raises(StreamError, match="unfinished tool calls"):
        await engine.run_inference(turn)
    assert [b.kind.value for b in turn.blocks] == ["user", "llm_text"]
    assert isinstance(events[-1], EventError) and "message_stop" in events[-1].message
    assert not any(isinstance(e, EventToolCallRequested | EventFinal) for e in events)


@pytest.mark.parametrize(
    ("make", "variable"),
    [
        (lambda: ChatEngine("gpt-4o"), "OPENAI_API_KEY"),
        (lambda: ClaudeEngine("claude-sonnet-4"), "ANTHROPIC_API_KEY"),
        (lambda: GeminiEngine("gemini-2.5-flash"), "GEMINI_API_KEY or GOOGLE_API_KEY"),
    ],
)
def test_a_missing_key_names_the_variable(make: Callable[[], Any], variable: str) -> None:
    with pytest.raises(ConfigurationError, match=f"set the {variable} environment variable"):
        make()


def test_keys_come_from_the_environment_and_compatible_servers_need_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "from-env")
    assert GeminiEngine("gemini-2.5-flash").api_key == "from-env"
    local = ChatEngine("llama3.2", base_url="http://localhost:11434/v1/")
    assert (local.api_key, local.base_url, local.max_tokens_field) == (None, "http://localhost:11434/v1", "max_tokens")


def test_bad_tools_and_tool_choice_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="has no name"):
        ChatEngine("m", api_key="k", tools=[{"description": "nameless"}])
    with pytest.raises(UsageError, match="tool_choice ''"):
        ClaudeEngine("m", api_key="k", tools=[{"name": "a"}], tool_choice="")
    # A name is checked per request, against the engine's tools and those a Session's tool loop offers.
    engine = ClaudeEngine("m", api_key="k", tools=[{"name": "a"}], tool_choice="nope")
    with pytest.raises(
        UsageError, match=r"tool_choice 'nope' .* a tool offered \(the engine's and the Session's tools: a\)"
    ):
        engine.build_request(Turn(blocks=[Block.user("hi")]))


class ToolDef:
    name = "lookup"
    description = "Look a word up"
    parameters = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}  # noqa: RUF012


def test_tool_objects_with_attributes_are_accepted() -> None:
    engine = GeminiEngine("gemini-2.5-flash", api_key="k", tools=[ToolDef()])
    assert engine.build_request(user_turn())["tools"] == [
        {
            "functionDeclarations": [
                {"name": "lookup", "description": "Look a word up", "parametersJsonSchema": ToolDef.parameters}
            ]
        }
    ]


async def test_a_given_transport_is_used_and_retries_follow_its_policy() -> None:
    attempts: list[int] = []
    body = stream_text("gemini_text.sse")

    def handler(request: httpx.Request) -> httpx.Response:
        attempts.append(1)
        if len(attempts) == 1:
            return httpx.Response(
                503, json={"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}
            )
        return httpx.Response(200, text=body)

    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    transport = HttpTransport(
        "http://gemini.test",
        provider="gemini",
        transport=httpx.MockTransport(handler),
        retry=RetryPolicy(),
        sleep=sleep,
    )
    turn, _ = await run(GeminiEngine("gemini-2.5-flash", api_key="k", http=transport), user_turn())
    assert (len(attempts), len(slept), turn.blocks[-1].text) == (2, 1, "Hello, world!")


async def test_an_unknown_model_names_the_fix() -> None:
    seen: Recorded = []
    body = '{"error": {"code": 404, "message": "models/gemini-9 is not found for API version v1beta.", "status": "NOT_FOUND"}}'
    engine = GeminiEngine("gemini-9", api_key="k", http=mock("", seen, status=404, body=body))
    events: list[Event] = []
    with with_sinks(events.append), pytest.raises(NotFoundError) as info:
        await engine.run_inference(user_turn())
    assert info.value.message == (
        "models/gemini-9 is not found for API version v1beta. (check the model name 'gemini-9' and the base URL)"
    )
    assert (info.value.status, info.value.error_type) == (404, "NOT_FOUND")
    assert isinstance(events[-1], EventError) and "check the model name" in events[-1].message


def test_claude_thinking_with_a_forced_tool_fails_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="Claude cannot think while tool_choice forces a tool"):
        ClaudeEngine("m", api_key="k", tools=[{"name": "a"}], tool_choice="a", thinking_budget=1024)


def test_reasoning_effort_picks_a_thinking_budget_on_claude_and_gemini() -> None:
    claude = ClaudeEngine("m", api_key="k", reasoning_effort="low")
    gemini = GeminiEngine("m", api_key="k", reasoning_effort="high", thinking_budget=512)
    assert (claude.thinking_budget, gemini.thinking_budget) == (2048, 512)
    assert claude.build_request(user_turn())["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    with pytest.raises(UsageError, match="reasoning_effort 'max' is not one of minimal, low, medium, high"):
        GeminiEngine("m", api_key="k", reasoning_effort="max")


async def test_a_malformed_tool_call_fragment_publishes_an_error_event() -> None:
    chunk = '{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":null,"function":{"arguments":"{}"}}]}}]}'
    seen: Recorded = []
    engine = ChatEngine("gpt-4o-mini", api_key="k", http=mock("", seen, body=f"data: {chunk}\n\n"))
    events: list[Event] = []
    with with_sinks(events.append), pytest.raises(StreamError, match="tool call fragment with index None"):
        await engine.run_inference(user_turn())
    assert isinstance(events[-1], EventError) and events[-1].error_type == "StreamError"


NOT_FOUND = {
    "chat": '{"error": {"message": "The model `gpt-9` does not exist or you do not have access to it.", '
    '"type": "invalid_request_error", "param": null, "code": "model_not_found"}}',
    "claude": '{"type": "error", "error": {"type": "not_found_error", "message": "model: claude-9"}, "request_id": "req_1"}',
}


@pytest.mark.parametrize(
    ("make", "body", "message"),
    [
        (
            lambda http: ChatEngine("gpt-9", api_key="k", http=http),
            NOT_FOUND["chat"],
            "The model `gpt-9` does not exist or you do not have access to it. (check the model name 'gpt-9' and the base URL)",
        ),
        (
            lambda http: ClaudeEngine("claude-9", api_key="k", http=http),
            NOT_FOUND["claude"],
            "model: claude-9 (check the model name 'claude-9' and the base URL)",
        ),
    ],
    ids=["chat", "claude"],
)
async def test_an_unknown_model_names_the_fix_on_chat_and_claude(
    make: Callable[[httpx.AsyncClient], Any], body: str, message: str
) -> None:
    seen: Recorded = []
    with pytest.raises(NotFoundError) as info:
        await make(mock("", seen, status=404, body=body)).run_inference(user_turn())
    assert (info.value.message, info.value.status) == (message, 404)


async def test_a_compatible_server_refusing_a_missing_key_names_the_variable() -> None:
    body = (
        '{"error": {"message": "Missing bearer token", "type": "invalid_request_error", "param": null, "code": null}}'
    )
    seen: Recorded = []
    engine = ChatEngine("llama3.2", base_url="http://gateway.test/v1", http=mock("", seen, status=401, body=body))
    with pytest.raises(AuthenticationError) as info:
        await engine.run_inference(user_turn())
    assert "authorization" not in seen[0].headers
    assert info.value.message == (
        "Missing bearer token (no API key was sent: pass api_key=... or set the OPENAI_API_KEY environment variable)"
    )


async def test_a_wrong_gemini_key_is_an_authentication_error_naming_the_variables() -> None:
    body = json.dumps(
        [
            {
                "error": {
                    "code": 400,
                    "message": "API key not valid. Please pass a valid API key.",
                    "status": "INVALID_ARGUMENT",
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                            "reason": "API_KEY_INVALID",
                            "domain": "googleapis.com",
                            "metadata": {"service": "generativelanguage.googleapis.com"},
                        }
                    ],
                }
            }
        ]
    )
    seen: Recorded = []
    engine = GeminiEngine("gemini-2.5-flash", api_key="wrong", http=mock("", seen, status=400, body=body))
    with pytest.raises(AuthenticationError) as info:
        await engine.run_inference(user_turn())
    assert (info.value.status, info.value.code, info.value.error_type) == (400, "API_KEY_INVALID", "INVALID_ARGUMENT")
    assert info.value.message == (
        "API key not valid. Please pass a valid API key. "
        "(check the key passed as api_key= or set in GEMINI_API_KEY or GOOGLE_API_KEY)"
    )


def weather(location: str) -> str:
    """Weather for a place."""
    return f"18C in {location}"


async def test_deepseek_reasoning_goes_from_the_stream_into_the_next_requests() -> None:
    """Captured DeepSeek stream -> reasoning and tool_call blocks -> reasoning_content sent back with the call,
    in the tool loop and after the next user message too (DeepSeek requires it for exchanges with tool calls)."""
    replies = [stream_text("deepseek_chat_reasoning_tool_call.jsonl"), stream_text("chat_deepseek_reasoning.sse")] * 2
    seen: Recorded = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, text=replies[len(seen) - 1])

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    engine = with_middleware(
        ChatEngine("deepseek-v4-flash", api_key="k", base_url="https://api.deepseek.test/v1", http=http),
        tool_loop(ToolRegistry([weather])),
    )
    turn = await engine.run_inference(user_turn("Weather in San Francisco?"))
    reasoning = "The user asks about the weather in San Francisco. I should use the weather tool."
    assert [(b.kind.value, b.text) for b in turn.blocks if b.kind.value in ("reasoning", "llm_text")] == [
        ("reasoning", reasoning),
        ("reasoning", "Two plus two is four."),
        ("llm_text", "The answer is 4."),
    ]
    call_message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_00_IhCAliIHtM9gKpgfqbBV9873",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"location": "San Francisco"}'},
            }
        ],
        "reasoning_content": reasoning,
    }
    second = json.loads(seen[1].content)["messages"]
    assert second == [
        {"role": "user", "content": "Weather in San Francisco?"},
        call_message,
        {"role": "tool", "tool_call_id": "call_00_IhCAliIHtM9gKpgfqbBV9873", "content": "18C in San Francisco"},
    ]
    turn.append(Block.user("Thanks. And tomorrow?"))
    await engine.run_inference(turn)
    third = json.loads(seen[2].content)["messages"]
    assert third[1] == call_message
    assert third[3] == {
        "role": "assistant",
        "content": "The answer is 4.",
        "reasoning_content": "Two plus two is four.",
    }
    await http.aclose()
