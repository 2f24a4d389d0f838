"""One session moves between the Interactions engine and the other engines (Responses, Claude, Gemini's
generateContent) with tool calls: every request is accepted by the simulator, other providers' reasoning
is never sent as a thought, and coming back the Interactions engine chains on its own interaction with the
other engines' blocks as the delta, the server's history then equal to the Turn."""

from __future__ import annotations

from typing import Any

from interactions_support import THINKING, assert_server_holds_the_turn, creates, engine

from geppetto import Session
from geppetto.middleware import tool_loop, with_middleware
from geppetto.providers._retry import RetryPolicy
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.tools import ToolRegistry
from geppetto.turns import BLOCK_META_PROVIDER, BLOCK_META_RESPONSE_ID, Turn

FAST = RetryPolicy(max_retries=0)


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C in {city}"


REGISTRY = ToolRegistry([get_weather])


async def step(session: Session, eng: Any, text: str) -> Turn:
    session.engine = with_middleware(eng, tool_loop(REGISTRY))
    return await session.run(text)


async def test_a_session_moves_between_interactions_and_the_other_engines(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(
        Reply(reasoning="Interactions thinks.", tool_calls=[ToolCall("get_weather", {"city": "Paris"})]),
        Reply(text="Paris: 18C."),
        Reply(reasoning="Responses thinks.", tool_calls=[ToolCall("get_weather", {"city": "Rome"})]),
        Reply(text="Rome: 18C."),
        Reply(reasoning="Claude thinks.", tool_calls=[ToolCall("get_weather", {"city": "Oslo"})]),
        Reply(text="Oslo: 18C."),
        Reply(tool_calls=[ToolCall("get_weather", {"city": "Lima"})]),
        Reply(text="Lima: 18C."),
        Reply(text="Four cities, all 18C."),
    )
    interactions = engine(sim, model=THINKING)
    session = Session(interactions)
    await step(session, interactions, "Weather in Paris?")
    await step(session, ResponsesEngine("sim-1", "sk-test", sim.openai_url, mode="stateless"), "And Rome?")
    await step(session, ClaudeEngine("sim-1", "sk-ant", sim.url, retry=FAST, thinking_budget=1024), "And Oslo?")
    await step(session, GeminiEngine("sim-1", "g-key", sim.url, retry=FAST), "And Lima?")
    final = await step(session, interactions, "Summary?")

    assert final.blocks[-1].text == "Four cities, all 18C."
    providers = {BLOCK_META_PROVIDER.get(b.metadata) for b in final.blocks} - {None}
    assert providers == {"gemini-interactions", "openai", "anthropic", "gemini"}
    _first, second, back = creates(sim)
    assert second["previous_interaction_id"]  # the tool result after the first interaction
    paris = next(b for b in final.blocks if b.text == "Paris: 18C.")
    # back on Interactions: the delta after its own interaction carries the other engines' turns, and
    # no other provider's reasoning goes as a thought
    assert back["previous_interaction_id"] == paris.metadata[str(BLOCK_META_RESPONSE_ID)]
    kinds = [s["type"] for s in back["input"]]
    assert kinds.count("function_call") == 3 and kinds.count("function_result") == 3 and "thought" not in kinds
    assert "thinks" not in str(back["input"])
    assert_server_holds_the_turn(sim, final)
