"""Built-in tool calls end to end against the simulator: enabled per engine, kept as typed ``other`` blocks,
announced by events, and sent back as they came in the next request (stateless, and chained on Responses),
which the simulator accepts as the services do."""

from __future__ import annotations

from typing import Any

import pytest

from geppetto import Block, Turn
from geppetto.events import EventBuiltinTool, with_sinks
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.anthropic import server_tools as claude_tools
from geppetto.providers.gemini import GeminiEngine
from geppetto.providers.gemini import server_tools as gemini_tools
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import BuiltinCall, Reply, Simulator
from geppetto.turns import BlockKind, builtin_of

RESULTS = [{"title": "Paris weather", "url": "https://example.com/paris", "text": "Sunny, 21C."}]


async def _two_prompts(engine: Any, sim: Simulator) -> tuple[Turn, list[EventBuiltinTool]]:
    sim.queue(Reply(text="Sunny in Paris.", builtin=[BuiltinCall("web_search", "paris weather", RESULTS)]))
    sim.queue(Reply(text="You asked about Paris."))
    events: list[Any] = []
    with with_sinks(events.append):
        turn = await engine.run_inference(Turn(blocks=[Block.user("Search the latest Paris weather")]))
        turn.append(Block.user("What did I ask?"))
        turn = await engine.run_inference(turn)
    return turn, [e for e in events if isinstance(e, EventBuiltinTool)]


def _kept(turn: Turn) -> list[dict[str, Any]]:
    return [b.payload["item"] for b in turn.blocks if b.kind is BlockKind.OTHER]


async def test_claude_web_search_round_trips(geppetto_sim: Simulator) -> None:
    engine = ClaudeEngine("claude-sonnet-4-5", "k", geppetto_sim.url, builtin_tools=[claude_tools.web_search()])
    turn, events = await _two_prompts(engine, geppetto_sim)
    kept = _kept(turn)
    assert [k["type"] for k in kept] == ["server_tool_use", "web_search_tool_result"]
    assert [(e.tool, e.phase) for e in events] == [("web_search", "call"), ("web_search", "result")]
    assert [builtin_of(b)["tool"] for b in turn.blocks if builtin_of(b)] == ["web_search", "web_search"]  # type: ignore[index]
    second = geppetto_sim.requests[-1].body["messages"]
    assert second[1]["role"] == "assistant" and second[1]["content"][:2] == kept  # sent back as they came
    assert turn.blocks[-1].text == "You asked about Paris."


async def test_gemini_search_grounding_and_code_round_trip(geppetto_sim: Simulator) -> None:
    engine = GeminiEngine(
        "gemini-2.5-flash",
        "k",
        geppetto_sim.url,
        builtin_tools=[gemini_tools.google_search(), gemini_tools.code_execution()],
    )
    geppetto_sim.queue(
        Reply(text="It is 37170.", builtin=[BuiltinCall("code_execution", "print(3 * 12390)", "37170\n")])
    )
    geppetto_sim.queue(Reply(text="Done."))
    events: list[Any] = []
    with with_sinks(events.append):
        turn = await engine.run_inference(Turn(blocks=[Block.user("Calculate 3 * 12390 in python")]))
        turn.append(Block.user("Thanks"))
        turn = await engine.run_inference(turn)
    kept = _kept(turn)
    assert [next(iter(k.keys() - {"thoughtSignature"})) for k in kept] == ["executableCode", "codeExecutionResult"]
    assert [(e.tool, e.phase) for e in events if isinstance(e, EventBuiltinTool)] == [
        ("code_execution", "call"),
        ("code_execution", "result"),
    ]
    sent = geppetto_sim.requests[-1].body["contents"][1]["parts"]
    assert all(k in sent for k in kept)


@pytest.mark.parametrize("mode", ["stateless", "chained"])
async def test_responses_web_search_round_trips(geppetto_sim: Simulator, mode: str) -> None:
    engine = ResponsesEngine("sim-1", "k", geppetto_sim.openai_url, tools=[{"type": "web_search"}], mode=mode)
    turn, events = await _two_prompts(engine, geppetto_sim)
    (search,) = [k for k in _kept(turn) if k["type"] == "web_search_call"]
    assert [(e.tool, e.phase, e.call_id) for e in events] == [("web_search", "call", search["id"])]
    second = geppetto_sim.requests[-1].body
    if mode == "stateless":
        assert search in second["input"]
    else:
        assert second["previous_response_id"] and search not in second["input"]
    assert turn.blocks[-1].text == "You asked about Paris."
