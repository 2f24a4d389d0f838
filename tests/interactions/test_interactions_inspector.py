"""The web inspector's plan (``web._report.chained_plan``) of a Turn the Interactions engine answered last:
its anchor and the blocks the next request sends, or why the whole Turn goes, by the engine's own planning."""

from __future__ import annotations

from interactions_support import engine, last_interaction

from geppetto.simulator import Simulator
from geppetto.turns import Block, Turn
from geppetto.web._report import chained_plan


async def test_the_inspector_shows_the_interactions_anchor_and_why_a_turn_falls_back(geppetto_sim: Simulator) -> None:
    eng = engine(geppetto_sim)
    turn = await eng.run_inference(Turn(blocks=[Block.system("Be brief."), Block.user("hello")]))
    plan = chained_plan(turn)
    assert (plan.error and "nothing" not in plan.reason.lower()) or plan.full  # nothing new yet: whole Turn or error
    nxt = plan.next
    assert nxt is not None and nxt.anchor == last_interaction(turn) and not nxt.full and nxt.sent_ids == []
    turn.blocks[1].payload["text"] = "hello, edited"
    edited = chained_plan(turn).next
    assert edited is not None and edited.full and edited.fallback == "fingerprint_mismatch" and edited.anchor is None


async def test_geppetto_inspect_names_the_interactions_anchor(geppetto_sim: Simulator) -> None:
    from geppetto.cli._inspect import _chains, plan_lines

    eng = engine(geppetto_sim)
    turn = await eng.run_inference(Turn(blocks=[Block.user("hello")]))
    anchor = last_interaction(turn)
    turn.append(Block.user("again"))
    assert _chains(turn)
    (line,) = plan_lines(chained_plan(turn), len(turn.blocks))
    assert line == f"chained request: previous_interaction_id={anchor}, sends 1 of 3 blocks"
