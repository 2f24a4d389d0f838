"""An engine-level ``tool_choice`` that names a Session's tool forces that tool on all four engines alike.

The name is checked per request, against the engine's own tools and those the Session's tool loop
offers, so an engine can be built before the Session that gives it its tools.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import geppetto as gp
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine
from geppetto.providers.openai_chat import ChatEngine
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import Reply, Simulator, ToolCall


def get_weather(city: str) -> str:
    """Get the weather for a city."""
    return f"18C in {city}"


def _forced(body: dict[str, Any]) -> Any:
    return body.get("tool_choice") or body.get("toolConfig")


ENGINES: list[tuple[str, Callable[[Simulator], Any], Any]] = [
    (
        "chat",
        lambda s: ChatEngine("sim-1", "k", s.openai_url, tool_choice="get_weather"),
        {"type": "function", "function": {"name": "get_weather"}},
    ),
    (
        "claude",
        lambda s: ClaudeEngine("sim-1", "k", s.url, tool_choice="get_weather"),
        {"type": "tool", "name": "get_weather"},
    ),
    (
        "gemini",
        lambda s: GeminiEngine("sim-1", "k", s.url, tool_choice="get_weather"),
        {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}},
    ),
    (
        "responses",
        lambda s: ResponsesEngine("sim-1", "k", s.openai_url, tool_choice="get_weather", mode="stateless"),
        {"type": "function", "name": "get_weather"},
    ),
]


@pytest.mark.parametrize(("name", "make", "wire"), ENGINES, ids=[e[0] for e in ENGINES])
async def test_an_engine_tool_choice_naming_a_session_tool_forces_it(
    name: str, make: Callable[[Simulator], Any], wire: Any, geppetto_sim: Simulator
) -> None:
    geppetto_sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"})]), Reply(text="18C."))
    session = gp.Session(make(geppetto_sim), tools=[get_weather])
    turn = await session.run("Weather in Oslo?")
    assert turn.blocks[-1].text == "18C."
    assert _forced(geppetto_sim.requests[0].body) == wire


@pytest.mark.parametrize(("name", "make", "wire"), ENGINES, ids=[e[0] for e in ENGINES])
async def test_an_engine_tool_choice_naming_no_offered_tool_is_refused_with_the_tools_there_are(
    name: str, make: Callable[[Simulator], Any], wire: Any, geppetto_sim: Simulator
) -> None:
    engine = make(geppetto_sim)  # built without tools: the name cannot be checked yet
    with pytest.raises(gp.UsageError, match="tool_choice 'get_weather'"):
        await gp.Session(engine, tools=[_other]).run("hi")


def _other(text: str) -> str:
    """Another tool."""
    return text
