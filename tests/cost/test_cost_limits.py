"""Cost and limits over a session against the simulator: every request priced from its usage, limits
checked before each request."""

from __future__ import annotations

from typing import Any

import pytest

import geppetto as gp
from geppetto.events import Event, EventFinal, with_sinks
from geppetto.pricing import BLOCK_META_USAGE, Rates, StaticPrices, price
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine
from geppetto.providers.openai_chat import ChatEngine
from geppetto.simulator import Reply, Simulator, ToolCall

PRICES = StaticPrices({"sim-1": Rates(input=2.0, output=8.0, cached_input=0.5, cache_write=2.5)})


def lookup(city: str) -> str:
    """Look a city up."""
    return f"facts about {city}"


def engines(sim: Simulator) -> dict[str, Any]:
    return {
        "responses": sim.engine("openai-responses"),
        "chat": ChatEngine("sim-1", "sk-test", sim.openai_url),
        "claude": ClaudeEngine("sim-1", "sk-ant-test", sim.url),
        "gemini": GeminiEngine("sim-1", "g-test", sim.url),
    }


def five_step_loop(sim: Simulator) -> None:
    """Four steps that each call a tool, then an answer: a five-request tool loop."""
    calls = [Reply(tool_calls=[ToolCall("lookup", {"city": f"c{i}"}, call_id=f"call_{i}")]) for i in range(4)]
    sim.queue(*calls, Reply(text="done"))


@pytest.mark.parametrize("name", ["responses", "chat", "claude", "gemini"])
async def test_cost_of_a_tool_loop_is_the_sum_of_its_requests_priced_from_usage(
    geppetto_sim: Simulator, name: str
) -> None:
    five_step_loop(geppetto_sim)
    events: list[Event] = []
    session = gp.Session(engines(geppetto_sim)[name], tools=[lookup], prices=PRICES)
    with with_sinks(events.append):
        out = await session.run("go")
    finals = [e for e in events if isinstance(e, EventFinal)]
    assert len(finals) == 5
    stamps = [s for b in out.blocks if (s := BLOCK_META_USAGE.get(b.metadata)) is not None]
    assert len(stamps) == 5
    expected = sum(e.metadata.cost["total"] for e in finals if e.metadata.cost)
    from_usage = sum(
        price(e.metadata.usage, e.metadata.provider, "sim-1", PRICES).total  # type: ignore[union-attr]
        for e in finals
    )
    usage = session.usage
    assert usage.requests == 5
    assert usage.tool_calls == 4
    assert usage.input_tokens == sum(e.metadata.usage.input_tokens for e in finals)  # type: ignore[union-attr]
    assert usage.cost == pytest.approx(expected) == pytest.approx(from_usage)
    assert usage.cost == pytest.approx(sum(s["cost"]["total"] for s in stamps))
    assert usage.cost > 0


async def test_max_requests_raises_before_the_fourth_request_with_three_steps_kept(geppetto_sim: Simulator) -> None:
    five_step_loop(geppetto_sim)
    session = gp.Session(
        ClaudeEngine("sim-1", "sk-ant-test", geppetto_sim.url), tools=[lookup], limits=gp.UsageLimits(max_requests=3)
    )
    with pytest.raises(gp.UsageLimitExceeded, match="max_requests=3") as caught:
        await session.run("go")
    err = caught.value
    assert err.limit == "max_requests" and err.value == 3 and err.maximum == 3
    assert len([r for r in geppetto_sim.requests if r.path == "/v1/messages"]) == 3
    kinds = [b.kind for b in err.turn.blocks]
    assert kinds.count(gp.BlockKind.TOOL_CALL) == 3 and kinds.count(gp.BlockKind.TOOL_USE) == 3
    assert session.usage.requests == 3 and not session.running
    # the session stays usable: raise the limit and go on
    session.limits = None
    out = await session.run("again")  # the two replies left: one more tool call, then the answer
    assert out.blocks[-1].text == "done"
    assert session.usage.requests == 5
