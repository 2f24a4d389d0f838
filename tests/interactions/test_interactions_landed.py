"""An interaction whose stream broke after its id arrived is read back with ``GET /interactions/{id}``, never
created a second time (see ``providers._landed``)."""

from __future__ import annotations

import pytest
from interactions_support import PATH, assert_server_holds_the_turn, creates, engine, last_interaction

import geppetto as gp
from geppetto._exceptions import StreamError
from geppetto.middleware import tool_loop
from geppetto.providers.gemini import get_interactions_state
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import Block, BlockKind, Turn

CREATED = 1
"""Stream events up to and including ``interaction.created``."""


def _turn() -> Turn:
    return Turn(blocks=[Block.user("Weather in Oslo?")])


async def test_a_chained_stream_cut_after_created_is_read_back(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="First."), Reply(text="Sunny and warm tomorrow."))
    eng = engine(sim, poll_interval=0.01)
    turn = await eng.run_inference(_turn())
    first = last_interaction(turn)
    turn.append(Block.user("And tomorrow?"))
    sim.fail_next(drop_after=CREATED + 1, finish_after_cut=True, finish_delay=0.05)
    turn = await eng.run_inference(turn)
    assert [b.text for b in turn.blocks if b.kind is BlockKind.LLM_TEXT] == ["First.", "Sunny and warm tomorrow."]
    posted = creates(sim)
    assert len(posted) == 2 and posted[1]["previous_interaction_id"] == first  # the step was created once
    iid = last_interaction(turn)
    assert f"{PATH}/{iid}" in [r.path for r in sim.requests if r.method == "GET"]
    state = get_interactions_state(turn)
    assert state is not None and state.previous_interaction_id == iid  # it anchors the next request
    assert_server_holds_the_turn(sim, turn)


async def test_a_tool_loop_broken_after_created_runs_the_tool_once(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"})]), Reply(text="Sunny."))
    ran: list[str] = []

    def get_weather(city: str) -> str:
        """Weather for a city."""
        ran.append(city)
        return f"sunny in {city}"

    sim.fail_next(drop_after=CREATED, finish_after_cut=True)
    eng = gp.with_middleware(engine(sim), tool_loop(gp.ToolRegistry([get_weather])))
    turn = await eng.run_inference(_turn())
    assert turn.blocks[-1].text == "Sunny." and ran == ["Oslo"]
    assert len(creates(sim)) == 2  # one per step


async def test_an_interaction_the_service_did_not_keep_says_a_retry_is_safe(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="lost"))
    sim.fail_next(drop_after=CREATED + 1)  # aborted with its stream: nothing stored
    with pytest.raises(StreamError, match="did not land, so sending the request again is safe"):
        await engine(sim).run_inference(_turn())
    assert len(creates(sim)) == 1
