"""Tools like every geppetto engine: the engine's own plus the tool loop's, the turn's ToolConfig, a
tool-name tool_choice in the Responses form, @tool objects with their schema; reasoning settings checked."""

from __future__ import annotations

from typing import Any

import pytest
from responses_support import WEATHER_TOOL, assert_valid_requests

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.tools import TOOL_CONFIG, ToolConfig
from geppetto.turns import Block, BlockKind, Turn


def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


WEATHER_WIRE = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"title": "City", "type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": False,
}


def _bare(sim: Simulator, **kw: Any) -> ResponsesEngine:
    return ResponsesEngine("sim-1", api_key="sk-test", base_url=sim.openai_url, **kw)


def _turn(text: str = "weather in Paris?") -> Turn:
    turn = Turn()
    turn.append(Block.user(text))
    return turn


def _tools_sent(sim: Simulator) -> list[Any]:
    return [r.body.get("tools") for r in sim.requests if r.path == "/v1/responses"]


async def test_session_tools_reach_an_engine_built_without_tools(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]), Reply(text="Sunny."))
    session = gp.Session(_bare(sim), tools=[get_weather])
    out = await session.run("weather in Paris?")
    assert [b.kind for b in out.blocks] == [BlockKind.USER, BlockKind.TOOL_CALL, BlockKind.TOOL_USE, BlockKind.LLM_TEXT]
    assert out.blocks[2].payload["result"] == "sunny in Paris" and out.blocks[3].text == "Sunny."
    assert WEATHER_WIRE["parameters"] == gp.tool(get_weather).definition.parameters
    assert _tools_sent(sim) == [[WEATHER_WIRE], [WEATHER_WIRE]]
    assert_valid_requests(sim)


async def test_the_simulated_model_calls_a_tool_it_is_only_offered_by_the_loop(geppetto_sim: Simulator) -> None:
    """Unscripted: the simulator calls a tool only when the request offers it."""
    session = gp.Session(_bare(geppetto_sim), tools=[get_weather])
    out = await session.run("What is the weather in Paris?")
    assert [b.kind for b in out.blocks][-3:] == [BlockKind.TOOL_CALL, BlockKind.TOOL_USE, BlockKind.LLM_TEXT]
    assert "sunny in Paris" in out.blocks[-1].text


async def test_tool_objects_keep_their_description_and_schema(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="ok"), Reply(text="ok"), Reply(text="ok"))
    for tools in ([gp.tool(get_weather)], [gp.tool(get_weather).definition], [get_weather]):
        await _bare(sim, tools=tools).run_inference(_turn())
    assert _tools_sent(sim) == [[WEATHER_WIRE]] * 3


def test_a_non_tool_is_refused_with_the_fix() -> None:
    with pytest.raises(gp.UsageError, match=r"@geppetto\.tool"):
        ResponsesEngine("m", api_key="k", tools=[object()])
    with pytest.raises(gp.UsageError, match="twice"):
        ResponsesEngine("m", api_key="k", tools=[WEATHER_TOOL, WEATHER_TOOL])


async def test_tool_choice_forms_and_hosted_tools(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    hosted = {"type": "web_search"}
    sim.queue(*[Reply(text="ok")] * 4)
    await _bare(sim, tools=[WEATHER_TOOL], tool_choice="get_weather").run_inference(_turn())
    await _bare(sim, tools=[WEATHER_TOOL], tool_choice="required").run_inference(_turn())
    forced = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "get_weather"}]}
    await _bare(sim, tools=[WEATHER_TOOL], tool_choice=forced).run_inference(_turn())
    await _bare(sim, tools=[hosted, WEATHER_TOOL], tool_choice="auto").run_inference(_turn())
    bodies = [r.body for r in sim.requests]
    assert [b["tool_choice"] for b in bodies] == [
        {"type": "function", "name": "get_weather"},
        "required",
        forced,
        "auto",
    ]
    assert [t.get("name", t["type"]) for t in bodies[3]["tools"]] == ["get_weather", "web_search"]
    assert_valid_requests(sim)


async def test_a_tool_choice_naming_no_offered_tool_is_refused(geppetto_sim: Simulator) -> None:
    with pytest.raises(gp.UsageError, match="tool_choice 'nope'"):
        await _bare(geppetto_sim, tools=[WEATHER_TOOL], tool_choice="nope").run_inference(_turn())
    with pytest.raises(gp.ConfigurationError, match="tool_choice"):
        _bare(geppetto_sim, tool_choice={"name": "get_weather"})


@pytest.mark.parametrize(
    ("config", "expected"), [("none", "none"), ("get_weather", {"type": "function", "name": "get_weather"})]
)
async def test_the_turn_tool_config_applies_when_the_engine_has_no_choice(
    geppetto_sim: Simulator, config: str, expected: Any
) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="ok"), Reply(text="ok"))
    turn = _turn()
    TOOL_CONFIG.set(turn.data, ToolConfig(tool_choice=config))
    await _bare(sim, tools=[WEATHER_TOOL]).run_inference(turn)
    await _bare(sim, tools=[WEATHER_TOOL], tool_choice="auto").run_inference(turn.clone())
    assert [r.body["tool_choice"] for r in sim.requests] == [expected, "auto"]


async def test_tool_config_enabled_narrows_what_the_loop_offers(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim

    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        return "4"

    sim.queue(Reply(text="ok"))
    turn = _turn()
    TOOL_CONFIG.set(turn.data, ToolConfig(enabled=["calculator"]))
    engine = gp.with_middleware(_bare(sim), gp.middleware.tool_loop(gp.ToolRegistry([get_weather, calculator])))
    await engine.run_inference(turn)
    assert [t["name"] for t in sim.requests[0].body["tools"]] == ["calculator"]


def test_reasoning_settings_are_checked_at_construction() -> None:
    with pytest.raises(gp.ConfigurationError, match="reasoning_effort 'extreme' is not one of none, minimal"):
        ResponsesEngine("o4-mini", api_key="k", reasoning_effort="extreme")
    with pytest.raises(gp.ConfigurationError, match="reasoning_summary"):
        ResponsesEngine("o4-mini", api_key="k", reasoning_summary="long")
    engine = ResponsesEngine("o4-mini", api_key="k", reasoning_effort="xhigh", reasoning_summary="auto")
    assert engine.reasoning_effort == "xhigh"


def test_every_built_body_is_checked_against_the_spec(_bodies_follow_the_spec: list[tuple[str, Any]]) -> None:
    """The autouse fixture in conftest.py validates every body: a malformed one fails the test that built it."""
    from geppetto.providers.openai_responses._request import Plan
    from geppetto.simulator._errors import SimError

    turn = Turn()
    turn.append(Block.system("be terse"))
    turn.append(Block.user("hi"))
    plan = Plan("stateless", [{"role": "user", "content": "hi"}])
    ResponsesEngine("gpt-4.1", api_key="k", instructions_mode=True).build_body(turn, plan)
    assert _bodies_follow_the_spec[-1][0] == "CreateResponse"
    with pytest.raises(SimError, match="bogus"):
        ResponsesEngine("gpt-4.1", api_key="k", text_format={"type": "bogus"}).build_body(turn, plan)
