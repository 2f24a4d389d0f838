"""``InteractionsEngine.validate``: the server's history behind the anchor, read link by link, equals the
Turn; a server that holds something else makes the next request send the whole Turn."""

from __future__ import annotations

from interactions_support import assert_server_holds_the_turn, creates, engine, last_interaction

from geppetto.simulator import Simulator
from geppetto.turns import Block, Turn


async def test_the_servers_history_matches_and_a_tampered_one_is_caught(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    eng = engine(sim)
    turn = await eng.run_inference(Turn(blocks=[Block.system("Be brief."), Block.user("hello")]))
    first = last_interaction(turn)
    turn.append(Block.user("again"))
    turn = await eng.run_inference(turn)
    checked = await eng.validate(turn)
    assert (checked.response_id, checked.matches, checked.requests) == (last_interaction(turn), True, 2)
    with sim.state.lock:  # the service lost or changed what it holds of the first interaction
        sim.state.interactions[first].steps[-1]["content"][0]["text"] = "something else"
    checked = await eng.validate(turn)
    assert checked.matches is False and "step 1" in checked.detail
    assert eng.metrics.snapshot()["counters"]["validation:mismatch"] == 1
    turn.append(Block.user("third"))
    turn = await eng.run_inference(turn)
    body = creates(sim)[-1]
    assert "previous_interaction_id" not in body and len(body["input"]) == 5
    assert eng.metrics.snapshot()["counters"]["fallback:not_anchorable"] == 1
    assert_server_holds_the_turn(sim, turn)


async def test_nothing_to_compare_without_an_anchor(geppetto_sim: Simulator) -> None:
    checked = await engine(geppetto_sim).validate(Turn(blocks=[Block.user("hello")]))
    assert checked.matches is None and checked.requests == 0
