"""``InteractionsEngine.count_tokens``: the Interactions API has no counting endpoint, so the engine estimates
from the whole Turn (what the model reads, held history included) without sending anything, says so
(``count_is_estimate``)."""

from __future__ import annotations

from interactions_support import creates, engine

from geppetto._json import dumps
from geppetto.simulator import Simulator
from geppetto.turns import Block, Turn


async def test_the_count_is_an_estimate_of_the_whole_turn_and_sends_nothing(geppetto_sim: Simulator) -> None:
    async with engine(geppetto_sim) as eng:
        assert eng.count_is_estimate is True
        turn = Turn(blocks=[Block.system("Answer in French."), Block.user("Name the capital of France.")])
        first = await eng.count_tokens(turn)
        assert geppetto_sim.requests == []  # no request: there is no endpoint to ask
        plan_body = eng.build_body(turn, eng.plan(turn))
        sent = {k: plan_body[k] for k in ("input", "system_instruction")}
        assert first == len(dumps(sent)) // 4  # four characters a token of what a whole-Turn request says
        turn = await eng.run_inference(turn)
        turn.append(Block.user("And of Italy?"))
        assert len(creates(geppetto_sim)[-1]["input"]) == 1  # the first request was the whole Turn
        chained = eng.build_body(turn, eng.plan(turn))
        assert chained.get("previous_interaction_id") and len(chained["input"]) == 1  # the next one a delta
        assert await eng.count_tokens(turn) > first  # still the whole conversation: the model reads it all
