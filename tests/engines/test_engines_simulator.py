"""ChatEngine, ClaudeEngine and GeminiEngine against the bundled simulator, over real loopback HTTP.

Each test runs for every engine: plain text, streamed deltas, a three-step tool loop with parallel
calls, reasoning replay, provider errors with the provider's own message, and retries.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from geppetto import (
    AuthenticationError,
    BadRequestError,
    Block,
    RateLimitError,
    ServerError,
    StreamError,
    Turn,
    run_sync,
)
from geppetto.events import (
    Event,
    EventError,
    EventFinal,
    EventReasoningDelta,
    EventTextDelta,
    EventToolCallRequested,
    with_sinks,
)
from geppetto.middleware import tool_loop, with_middleware
from geppetto.providers._retry import RetryPolicy
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine
from geppetto.providers.openai_chat import ChatEngine
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.tools import ToolRegistry
from geppetto.turns import (
    BLOCK_META_PROVIDER,
    PAYLOAD_SIGNATURE,
    PAYLOAD_THOUGHT_SIGNATURE,
    TURN_META_STOP_REASON,
    TURN_META_USAGE,
)

FAST = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.05)


def chat(sim: Simulator, **kw: Any) -> ChatEngine:
    return ChatEngine("sim-1", "sk-test", sim.openai_url, retry=FAST, **kw)


def claude(sim: Simulator, **kw: Any) -> ClaudeEngine:
    return ClaudeEngine("sim-1", "sk-ant-test", sim.url, retry=FAST, **kw)


def gemini(sim: Simulator, **kw: Any) -> GeminiEngine:
    return GeminiEngine("sim-1", "g-test", sim.url, retry=FAST, **kw)


Factory = Callable[..., Any]
ENGINES = [pytest.param(chat, id="chat"), pytest.param(claude, id="claude"), pytest.param(gemini, id="gemini")]


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C in {city}"


def get_time(city: str) -> str:
    """Local time in a city."""
    return f"12:00 in {city}"


def user_turn(text: str) -> Turn:
    turn = Turn()
    turn.extend([Block.system("You are terse."), Block.user(text)])
    return turn


async def run(engine: Any, turn: Turn) -> tuple[Turn, list[Event]]:
    events: list[Event] = []
    with with_sinks(events.append):
        out = await engine.run_inference(turn)
    return out, events


@pytest.mark.parametrize("make", ENGINES)
async def test_plain_text_streams_in_deltas(make: Factory, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="Hello from the simulated model."))
    turn, events = await run(make(geppetto_sim), user_turn("Say hello"))
    assert [(b.kind.value, b.text) for b in turn.blocks[2:]] == [("llm_text", "Hello from the simulated model.")]
    deltas = [e.delta for e in events if isinstance(e, EventTextDelta)]
    assert len(deltas) > 1 and "".join(deltas) == "Hello from the simulated model."
    final = events[-1]
    assert isinstance(final, EventFinal) and final.text == "Hello from the simulated model."
    assert final.metadata.stop_reason == TURN_META_STOP_REASON.get(turn.metadata) == "end_turn"
    usage = TURN_META_USAGE.get(turn.metadata) or {}
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0


@pytest.mark.parametrize("make", ENGINES)
async def test_three_step_tool_loop_with_parallel_calls(make: Factory, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(
        Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"}), ToolCall("get_weather", {"city": "Tokyo"})]),
        Reply(tool_calls=[ToolCall("get_time", {"city": "Paris"}), ToolCall("get_time", {"city": "Tokyo"})]),
        Reply(text="Paris 18C at noon; Tokyo 18C at noon."),
    )
    engine = with_middleware(make(geppetto_sim), tool_loop(ToolRegistry([get_weather, get_time])))
    turn, _ = await run(engine, user_turn("Weather and time in Paris and Tokyo?"))
    assert [(b.kind.value, b.payload.get("name"), b.payload.get("result")) for b in turn.blocks[2:]] == [
        ("tool_call", "get_weather", None),
        ("tool_call", "get_weather", None),
        ("tool_use", None, "18C in Paris"),
        ("tool_use", None, "18C in Tokyo"),
        ("tool_call", "get_time", None),
        ("tool_call", "get_time", None),
        ("tool_use", None, "12:00 in Paris"),
        ("tool_use", None, "12:00 in Tokyo"),
        ("llm_text", None, None),
    ]
    calls = [b for b in turn.blocks if b.kind.value == "tool_call"]
    results = [b for b in turn.blocks if b.kind.value == "tool_use"]
    assert [c.payload["id"] for c in calls] == [r.payload["id"] for r in results]
    assert turn.blocks[-1].text == "Paris 18C at noon; Tokyo 18C at noon."
    assert [r.size > 0 for r in geppetto_sim.requests] == [True, True, True]
    assert TURN_META_STOP_REASON.get(turn.metadata) == "end_turn"


@pytest.mark.parametrize("make", ENGINES)
async def test_tools_offered_reach_the_request(make: Factory, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="ok"))
    engine = make(
        geppetto_sim, tools=[{"name": "get_weather", "description": "Weather", "parameters": {"type": "object"}}]
    )
    await run(engine, user_turn("hi"))
    body = geppetto_sim.requests[-1].body
    assert "get_weather" in str(body["tools"])


async def test_claude_thinking_is_replayed_with_its_signature(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(
        Reply(reasoning="I need the weather tool.", tool_calls=[ToolCall("get_weather", {"city": "Paris"})]),
        Reply(reasoning="Now answer.", text="18C in Paris."),
    )
    engine = with_middleware(claude(geppetto_sim, thinking_budget=1024), tool_loop(ToolRegistry([get_weather])))
    turn, events = await run(engine, user_turn("Weather in Paris?"))
    thinking = [b for b in turn.blocks if b.kind.value == "reasoning"]
    assert [b.text for b in thinking] == ["I need the weather tool.", "Now answer."]
    assert all(b.payload[PAYLOAD_SIGNATURE] for b in thinking)
    assert (
        "".join(e.delta for e in events if isinstance(e, EventReasoningDelta)) == "I need the weather tool.Now answer."
    )
    second = geppetto_sim.requests[1].body
    # a request that replays thinking asks Claude to drop (not refuse) a block whose prefix changed
    assert second["thinking"] == {
        "type": "enabled",
        "budget_tokens": 1024,
        "block_binding": {"prefix_mismatch_behavior": "drop_block"},
    }
    assert "thinking-binding-controls-2026-08-01" in geppetto_sim.requests[1].headers["anthropic-beta"]
    assert second["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "I need the weather tool.",
        "signature": thinking[0].payload[PAYLOAD_SIGNATURE],
    }


async def test_gemini_thought_signatures_are_replayed_exactly(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(
        Reply(reasoning="Call the tool.", tool_calls=[ToolCall("get_weather", {"city": "Paris"})]),
        Reply(text="18C in Paris."),
    )
    engine = with_middleware(gemini(geppetto_sim, thinking_budget=-1), tool_loop(ToolRegistry([get_weather])))
    turn, _ = await run(engine, user_turn("Weather in Paris?"))
    call = next(b for b in turn.blocks if b.kind.value == "tool_call")
    signature = call.payload[PAYLOAD_THOUGHT_SIGNATURE]
    replayed = geppetto_sim.requests[1].body["contents"][1]["parts"]
    assert {
        "functionCall": {"id": call.payload["id"], "name": "get_weather", "args": {"city": "Paris"}},
        "thoughtSignature": signature,
    } in replayed
    assert turn.blocks[-1].text == "18C in Paris."


async def test_the_simulator_accepts_replayed_chat_reasoning_content(geppetto_sim: Simulator) -> None:
    turn = user_turn("Weather in Paris?")
    reasoning = Block.reasoning("I should call the tool.")
    turn.extend(
        [reasoning, Block.tool_call("call_1", "get_weather", {"city": "Paris"}), Block.tool_use("call_1", "18C")]
    )
    BLOCK_META_PROVIDER.set(reasoning.metadata, "openai_chat")  # as ChatEngine stamps its own blocks
    geppetto_sim.queue(Reply(text="18C."))
    out, _ = await run(chat(geppetto_sim), turn)
    assert out.blocks[-1].text == "18C."
    assert geppetto_sim.requests[0].body["messages"][2]["reasoning_content"] == "I should call the tool."


async def test_chat_reasoning_from_the_stream_is_replayed_with_its_tool_calls(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(
        Reply(reasoning="I should call the tool.", tool_calls=[ToolCall("get_weather", {"city": "Paris"})]),
        Reply(text="18C."),
    )
    engine = with_middleware(chat(geppetto_sim), tool_loop(ToolRegistry([get_weather])))
    turn, events = await run(engine, user_turn("Weather in Paris?"))
    reasoning = [b for b in turn.blocks if b.kind.value == "reasoning"]
    assert [(b.text, BLOCK_META_PROVIDER.get(b.metadata)) for b in reasoning] == [
        ("I should call the tool.", "openai_chat")
    ]
    assert "".join(e.delta for e in events if isinstance(e, EventReasoningDelta)) == "I should call the tool."
    assert geppetto_sim.requests[1].body["messages"][2]["reasoning_content"] == "I should call the tool."


async def test_a_thinking_server_gets_empty_reasoning_for_calls_another_provider_made(
    geppetto_sim: Simulator,
) -> None:
    """DeepSeek's thinking mode refuses an assistant message without reasoning_content in an exchange with
    tool calls, also one Claude made before the session moved to DeepSeek: it gets an empty one."""
    turn = user_turn("Weather in Paris?")
    turn.extend([Block.tool_call("toolu_1", "get_weather", {"city": "Paris"}), Block.tool_use("toolu_1", "18C")])
    for block in turn.blocks[2:]:
        BLOCK_META_PROVIDER.set(block.metadata, "anthropic")
    geppetto_sim.queue(Reply(text="18C."), Reply(text="18C."))
    out, _ = await run(ChatEngine("deepseek-reasoner", "sk-test", geppetto_sim.openai_url, retry=FAST), turn.clone())
    assert out.blocks[-1].text == "18C."
    assistant = geppetto_sim.requests[0].body["messages"][2]
    assert assistant["tool_calls"][0]["id"] == "toolu_1" and assistant["reasoning_content"] == ""
    with pytest.raises(BadRequestError, match="reasoning_content"):  # the same without the padding
        await run(ChatEngine("deepseek-reasoner", "sk-test", geppetto_sim.openai_url, thinking=False), turn)
    plain = ChatEngine("llama3.2", "sk-test", geppetto_sim.openai_url).build_request(turn)
    assert not any("reasoning_content" in m for m in plain["messages"])  # not a thinking server: not sent


@pytest.mark.parametrize("make", ENGINES)
async def test_a_bad_request_surfaces_the_providers_message(make: Factory, geppetto_sim: Simulator) -> None:
    turn = user_turn("Weather?")
    turn.append(Block.tool_call("call_9", "get_weather", {"city": "Paris"}))
    turn.append(Block.user("never mind"))  # the call is left without a result
    if make is gemini:
        turn = Turn()  # Gemini pairs calls loosely; an empty contents list is its classic 400
    with pytest.raises(BadRequestError) as info:
        await run(make(geppetto_sim), turn)
    expected = {
        chat: "did not have response messages: call_9",
        claude: "`tool_use` ids were found without `tool_result` blocks immediately after: call_9",
        gemini: "contents is not specified",
    }[make]
    assert expected in info.value.message
    assert info.value.status == 400


@pytest.mark.parametrize("make", ENGINES)
async def test_rate_limits_and_server_errors_are_retried_then_succeed(make: Factory, geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(status=429, retry_after=0.01)
    geppetto_sim.fail_next(status=529 if make is claude else 503)
    geppetto_sim.queue(Reply(text="Recovered."))
    turn, _ = await run(make(geppetto_sim), user_turn("hi"))
    assert turn.blocks[-1].text == "Recovered."
    assert len(geppetto_sim.requests) == 3


@pytest.mark.parametrize("make", ENGINES)
async def test_retries_give_up_with_the_providers_message(make: Factory, geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(status=429, retry_after=0.01, times=3)
    with pytest.raises(RateLimitError) as info:
        await run(make(geppetto_sim), user_turn("hi"))
    expected = {
        chat: "Rate limit reached for requests",
        claude: "Number of requests has exceeded your rate limit.",
        gemini: "Resource has been exhausted",
    }[make]
    assert expected in info.value.message
    assert len(geppetto_sim.requests) == 3
    geppetto_sim.fail_next(status=500, times=3)
    with pytest.raises(ServerError):
        await run(make(geppetto_sim), user_turn("hi"))


@pytest.mark.parametrize("make", ENGINES)
async def test_a_wrong_key_header_is_an_authentication_error(make: Factory, geppetto_sim: Simulator) -> None:
    engine = make(geppetto_sim)
    engine.api_key = ""  # the simulator answers a missing key the way each provider does
    if make is chat:
        engine.api_key = None
    with pytest.raises(AuthenticationError) as info:
        await run(engine, user_turn("hi"))
    expected = {
        chat: (401, "You didn't provide an API key."),
        claude: (401, "x-api-key header is required"),
        gemini: (403, "Method doesn't allow unregistered callers"),
    }[make]
    assert info.value.status == expected[0] and expected[1] in info.value.message


@pytest.mark.parametrize(
    ("make", "drop_after"),
    [pytest.param(chat, 5, id="chat"), pytest.param(claude, 8, id="claude"), pytest.param(gemini, 3, id="gemini")],
)
async def test_a_stream_dropped_mid_tool_call_never_yields_a_tool_call(
    make: Factory, drop_after: int, geppetto_sim: Simulator
) -> None:
    geppetto_sim.queue(Reply(text="Let me check.", tool_calls=[ToolCall("get_weather", {"city": "Paris"})]))
    geppetto_sim.fail_next(drop_after=drop_after)
    turn = user_turn("Weather in Paris?")
    events: list[Event] = []
    with with_sinks(events.append), pytest.raises(StreamError):
        await make(geppetto_sim).run_inference(turn)
    assert [b.kind.value for b in turn.blocks if b.kind.value == "tool_call"] == []
    assert not any(isinstance(e, EventToolCallRequested | EventFinal) for e in events)
    assert isinstance(events[-1], EventError)
    kept = [b.text for b in turn.blocks[2:]]
    assert kept == (["Let me check."] if make is claude else [])  # Claude closed its text block before the cut


@pytest.mark.parametrize("make", ENGINES)
async def test_a_malformed_event_is_a_stream_error(make: Factory, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="Hello there."))
    geppetto_sim.fail_next(malformed_after=1)
    turn = user_turn("hi")
    with pytest.raises(StreamError, match="malformed"):
        await make(geppetto_sim).run_inference(turn)
    assert len(turn.blocks) == 2


@pytest.mark.parametrize("make", ENGINES)
async def test_cancelling_mid_stream_appends_nothing(make: Factory, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="one two three four five six seven"))
    geppetto_sim.fail_next(stall_after=4, stall_seconds=2)
    turn = user_turn("count")
    first_delta = asyncio.Event()

    def sink(event: Event) -> None:
        if isinstance(event, EventTextDelta):
            first_delta.set()

    with with_sinks(sink):
        task = asyncio.create_task(make(geppetto_sim).run_inference(turn))
        await asyncio.wait_for(first_delta.wait(), timeout=5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert [b.kind.value for b in turn.blocks] == ["system", "user"]


@pytest.mark.parametrize("make", ENGINES)
def test_run_sync_works_twice_with_one_engine(make: Factory, geppetto_sim: Simulator) -> None:
    engine = make(geppetto_sim)
    geppetto_sim.queue(Reply(text="first"), Reply(text="second"))
    assert run_sync(engine, user_turn("a")).blocks[-1].text == "first"
    assert run_sync(engine, user_turn("b")).blocks[-1].text == "second"


@pytest.mark.parametrize("make", ENGINES)
async def test_truncation_is_reported_as_max_tokens(make: Factory, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="A long answer that was cut", stop="max_tokens"))
    turn, events = await run(make(geppetto_sim), user_turn("Write a lot"))
    assert TURN_META_STOP_REASON.get(turn.metadata) == "max_tokens"
    assert isinstance(events[-1], EventFinal) and events[-1].metadata.stop_reason == "max_tokens"
