"""One Turn across providers: a session moves Responses -> Claude -> Gemini -> Chat with tool calls.

Every request must be accepted by the simulator (which rejects what each real API rejects: unpaired
tool calls, unsigned or foreign thinking, corrupted thought signatures). Reasoning a provider cannot
take is left out of its requests and kept in the Turn.
"""

from __future__ import annotations

from typing import Any

from conformance_support import check_sent

from geppetto import Block, Session
from geppetto.middleware import tool_loop, with_middleware
from geppetto.providers._retry import RetryPolicy
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import FOREIGN_CALL_SIGNATURE, GeminiEngine
from geppetto.providers.openai_chat import ChatEngine
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.tools import ToolRegistry
from geppetto.turns import BLOCK_META_PROVIDER, Turn

FAST = RetryPolicy(max_retries=0)


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C in {city}"


def get_time(city: str) -> str:
    """Local time in a city."""
    return f"12:00 in {city}"


REGISTRY = ToolRegistry([get_weather, get_time])


def summary(turn: Turn) -> list[tuple[str, str]]:
    """(kind, producing provider) for every block the engines made."""
    return [
        (b.kind.value, BLOCK_META_PROVIDER.get(b.metadata) or "") for b in turn.blocks if b.kind.value != "tool_use"
    ]


async def step(session: Session, engine: Any, text: str) -> Turn:
    session.engine = with_middleware(engine, tool_loop(REGISTRY))
    return await session.run(text)


def queue_replies(sim: Simulator) -> None:
    sim.queue(
        Reply(reasoning="Responses thinks.", tool_calls=[ToolCall("get_weather", {"city": "Paris"})]),
        Reply(text="Paris: 18C."),
        Reply(
            reasoning="Claude thinks.",
            tool_calls=[ToolCall("get_time", {"city": "Paris"}), ToolCall("get_weather", {"city": "Tokyo"})],
        ),
        Reply(text="Noon in Paris, 18C in Tokyo."),
        Reply(reasoning="Gemini thinks.", tool_calls=[ToolCall("get_weather", {"city": "Oslo"})]),
        Reply(text="Oslo: 18C."),
        Reply(tool_calls=[ToolCall("get_time", {"city": "Oslo"})]),
        Reply(text="Noon in Oslo."),
    )


async def four_providers(sim: Simulator, *, thinking: bool) -> Turn:
    """Responses -> Claude -> Gemini -> Chat, with Claude's and Gemini's thinking on or off."""
    queue_replies(sim)
    claude_budget, gemini_budget = (1024, -1) if thinking else (None, None)
    responses = ResponsesEngine("sim-1", "sk-test", sim.openai_url, mode="stateless")
    session = Session(responses)  # the engine is swapped before every prompt
    await step(session, responses, "Weather in Paris?")
    claude = ClaudeEngine("sim-1", "sk-ant", sim.url, retry=FAST, thinking_budget=claude_budget)
    await step(session, claude, "Time in Paris, weather in Tokyo?")
    gemini = GeminiEngine("sim-1", "g-key", sim.url, retry=FAST, thinking_budget=gemini_budget)
    await step(session, gemini, "Weather in Oslo?")
    return await step(session, ChatEngine("sim-1", "sk-test", sim.openai_url, retry=FAST), "Time in Oslo?")


def bodies(sim: Simulator, suffix: str) -> list[dict[str, Any]]:
    return [r.body for r in sim.requests if r.path.endswith(suffix)]


async def test_a_session_moves_across_four_providers_with_tools(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    final = await four_providers(sim, thinking=False)

    assert final.blocks[-1].text == "Noon in Oslo."
    made = [s for s in summary(final) if s[1]]
    assert [kind for kind, _ in made] == [
        "reasoning", "tool_call", "llm_text",  # Responses
        "reasoning", "tool_call", "tool_call", "llm_text",  # Claude
        "reasoning", "tool_call", "llm_text",  # Gemini
        "tool_call", "llm_text",  # Chat
    ]  # fmt: skip
    paths = [r.path for r in sim.requests]
    assert paths[:2] == ["/v1/responses", "/v1/responses"] and paths[-2:] == ["/v1/chat/completions"] * 2

    claude_first = bodies(sim, "/v1/messages")[0]
    assert "gAAAA" not in str(claude_first)  # OpenAI's encrypted reasoning is not sent to Claude
    gemini_first = bodies(sim, ":streamGenerateContent")[0]
    assert "thinking" not in str(gemini_first) and "Claude thinks." not in str(gemini_first)
    answers = [p["functionResponse"] for c in gemini_first["contents"] for p in c["parts"] if "functionResponse" in p]
    assert [(r["name"], r["response"]) for r in answers] == [
        ("get_weather", {"output": "18C in Paris"}),
        ("get_time", {"output": "12:00 in Paris"}),
        ("get_weather", {"output": "18C in Tokyo"}),
    ]
    chat_first = bodies(sim, "/v1/chat/completions")[0]
    assert not any("reasoning_content" in m for m in chat_first["messages"])
    assert [m["role"] for m in chat_first["messages"]].count("tool") == 4
    for request in sim.requests:  # every body sent validates against its SDK's request type
        check_sent(request.path, request.body)


async def test_a_session_moves_across_four_providers_with_claude_and_gemini_thinking(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    final = await four_providers(sim, thinking=True)

    assert final.blocks[-1].text == "Noon in Oslo."
    made = [kind for kind, provider in summary(final) if provider]
    assert made == [
        "reasoning", "tool_call", "llm_text",  # Responses
        "reasoning", "tool_call", "tool_call", "reasoning", "llm_text",  # Claude, thinking before each answer
        "reasoning", "tool_call", "reasoning", "llm_text",  # Gemini, thoughts included
        "tool_call", "llm_text",  # Chat
    ]  # fmt: skip
    claude_second = bodies(sim, "/v1/messages")[1]
    assert claude_second["thinking"] == {
        "type": "enabled",
        "budget_tokens": 1024,
        "block_binding": {"prefix_mismatch_behavior": "drop_block"},
    }
    assert claude_second["messages"][-2]["content"][0]["type"] == "thinking"  # its own signed thinking leads
    first, second = bodies(sim, ":streamGenerateContent")
    calls = [p for c in first["contents"] for p in c["parts"] if "functionCall" in p]
    assert [p.get("thoughtSignature") for p in calls] == [None, None, None]  # earlier turns are not checked
    own = [p for p in second["contents"][-2]["parts"] if "functionCall" in p]
    assert own[0]["thoughtSignature"] not in (None, FOREIGN_CALL_SIGNATURE)  # Gemini's own signature, replayed
    for request in sim.requests:
        check_sent(request.path, request.body)


async def test_gemini_thinking_continues_another_providers_calls_in_the_same_turn(geppetto_sim: Simulator) -> None:
    turn = Turn()
    turn.extend([Block.user("Weather in Paris?")])
    call = Block.tool_call("toolu_01", "get_weather", {"city": "Paris"})
    BLOCK_META_PROVIDER.set(call.metadata, "anthropic")
    turn.extend([call, Block.tool_use("toolu_01", "18C in Paris")])
    geppetto_sim.queue(Reply(text="18C in Paris."))
    engine = GeminiEngine("sim-1", "g-key", geppetto_sim.url, retry=FAST, thinking_budget=-1)
    out = await engine.run_inference(turn)
    assert out.blocks[-1].text == "18C in Paris."
    sent = geppetto_sim.requests[-1].body["contents"][1]["parts"][0]
    assert sent["thoughtSignature"] == FOREIGN_CALL_SIGNATURE
