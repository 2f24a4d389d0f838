"""One inference per Turn at a time (seed 000, edge case 5): two ``run_inference`` calls at once on one Turn
outside a Session. The answer that finishes second was asked for on a Turn that no longer ends where its
request ended; it must not be tagged as an anchor (nor take the other answer's blocks into its response),
and the next request must give the model the conversation the Turn holds."""

from __future__ import annotations

import asyncio
import logging

import pytest
from responses_support import engine, normalize

from geppetto.providers.openai_responses import find_best_anchor, get_state
from geppetto.providers.openai_responses._items import blocks_to_items
from geppetto.providers.openai_responses._request import ANCHOR_REFUSED
from geppetto.simulator import Reply, Simulator
from geppetto.turns import BLOCK_META_RESPONSE_ID, Block, Turn

LOGGER = "geppetto.providers.openai_responses"


async def test_two_runs_at_once_on_one_turn_never_anchor_on_the_second(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="Answer A."), Reply(text="Answer B."), Reply(text="Answer C."))
    eng = engine(sim)
    turn = Turn(id="t-shared")
    turn.append(Block.user("hi"))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await asyncio.gather(eng.run_inference(turn), eng.run_inference(turn))

    answers = turn.blocks[1:]
    assert sorted(b.text for b in answers) == ["Answer A.", "Answer B."]
    ids = [BLOCK_META_RESPONSE_ID.get(b.metadata) for b in answers]
    assert len(set(ids)) == 2  # each answer keeps its own response id: none took the other's block
    first, second = answers
    assert ANCHOR_REFUSED.get(first.metadata) is None
    assert ANCHOR_REFUSED.get(second.metadata) == "concurrent inference on the same Turn"
    # the anchor is the answer that finished first; the state still names it
    assert find_best_anchor(turn) == ids[0]
    assert get_state(turn).previous_response_id == ids[0]  # type: ignore[union-attr]
    (warning,) = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert f"1 block(s) were added to the Turn while response {ids[1]} was running" in warning
    assert "turn=t-shared" in warning and "turn.clone()" in warning

    # The next request chains on the first answer and sends the second as input: the model then sees
    # exactly the conversation the Turn holds.
    turn.append(Block.user("and now?"))
    await eng.run_inference(turn)
    body = [r.body for r in sim.requests if r.path == "/v1/responses"][-1]
    assert body["previous_response_id"] == ids[0]
    third = str(BLOCK_META_RESPONSE_ID.get(turn.blocks[-1].metadata))
    assert normalize(sim.context_items(third)) == normalize(blocks_to_items(turn.blocks[:-1]))


async def test_runs_one_after_another_on_one_turn_chain_as_usual(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="One."), Reply(text="Two."))
    eng = engine(geppetto_sim)
    turn = Turn()
    turn.append(Block.user("hi"))
    await eng.run_inference(turn)
    turn.append(Block.user("more"))
    await eng.run_inference(turn)
    assert not any(ANCHOR_REFUSED.get(b.metadata) for b in turn.blocks)
    assert find_best_anchor(turn) == BLOCK_META_RESPONSE_ID.get(turn.blocks[-1].metadata)
