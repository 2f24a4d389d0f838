"""One Turn across providers: a session moves Responses -> Claude -> Gemini -> Chat with tool calls.

Every request must be accepted by the simulator (which rejects what each real API rejects: unpaired
tool calls, unsigned or foreign thinking, corrupted thought signatures). Reasoning a provider cannot
take is left out of its requests and kept in the Turn.
"""

from __future__ import annotations

from typing import Any

from geppetto import Session
from geppetto.middleware import tool_loop, with_middleware
from geppetto.providers._http import RetryPolicy
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine
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


async def test_a_session_moves_across_four_providers_with_tools(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
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
    responses = ResponsesEngine("sim-1", "sk-test", sim.openai_url, mode="stateless")
    session = Session(responses)  # the engine is swapped before every prompt
    await step(session, responses, "Weather in Paris?")
    await step(session, ClaudeEngine("sim-1", "sk-ant", sim.url, retry=FAST), "Time in Paris, weather in Tokyo?")
    await step(session, GeminiEngine("sim-1", "g-key", sim.url, retry=FAST), "Weather in Oslo?")
    final = await step(session, ChatEngine("sim-1", "sk-test", sim.openai_url, retry=FAST), "Time in Oslo?")

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

    claude_first = next(r.body for r in sim.requests if r.path == "/v1/messages")
    assert "gAAAA" not in str(claude_first)  # OpenAI's encrypted reasoning is not sent to Claude
    gemini_first = next(r.body for r in sim.requests if r.path.endswith(":streamGenerateContent"))
    assert "thinking" not in str(gemini_first) and "Claude thinks." not in str(gemini_first)
    answers = [p["functionResponse"] for c in gemini_first["contents"] for p in c["parts"] if "functionResponse" in p]
    assert [(r["name"], r["response"]) for r in answers] == [
        ("get_weather", {"output": "18C in Paris"}),
        ("get_time", {"output": "12:00 in Paris"}),
        ("get_weather", {"output": "18C in Tokyo"}),
    ]
    chat_first = next(r.body for r in sim.requests if r.path == "/v1/chat/completions")
    assert not any("reasoning_content" in m for m in chat_first["messages"])
    assert [m["role"] for m in chat_first["messages"]].count("tool") == 4
