"""The inspector's prediction is the engine's own plan, in every mode and on every path: what it says a
request sends is what the engine then sends."""

from __future__ import annotations

import pytest

import geppetto as gp
from geppetto.cli._inspect import plan_lines
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.web._report import chained_plan, turn_report


def _bodies(sim: Simulator) -> list[dict]:  # type: ignore[type-arg]
    return [r.body for r in sim.requests if r.path == "/v1/responses"]


@pytest.mark.parametrize("mode", ["chained", "conversation"])
async def test_the_prediction_is_what_the_engine_sends(geppetto_sim: Simulator, mode: str) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Again."), Reply(text="Two."))
    engine = ResponsesEngine("sim-1", api_key="k", base_url=sim.openai_url, mode=mode)
    turn = gp.Turn()
    turn.append(gp.Block.user("hi"))
    turn = await engine.run_inference(turn)

    # nothing after the anchor: the whole Turn now, as the engine then sends it
    now = chained_plan(turn)
    assert (now.full, now.sent_ids) == (True, [b.id for b in turn.blocks])
    assert now.next is not None and not now.next.full and now.next.sent_ids == []
    turn = await engine.run_inference(turn)
    sent = _bodies(sim)[-1]
    assert "previous_response_id" not in sent
    if mode == "chained":
        assert len(sent["input"]) == 2
    else:  # the whole Turn goes into a new conversation: all but its last item seed it
        assert len(sent["input"]) == 1 and sent["conversation"] != now.next.conversation

    # a new prompt: exactly the delta the engine sends, on the anchor or conversation predicted
    turn.append(gp.Block.user("more"))
    ahead = chained_plan(turn)
    await engine.run_inference(turn)
    sent = _bodies(sim)[-1]
    assert not ahead.full and len(ahead.sent_ids) == len(sent["input"]) == 1
    if mode == "chained":
        assert (ahead.anchor, sent["previous_response_id"]) == (sent["previous_response_id"], ahead.anchor)
        assert plan_lines(ahead, 5) == [f"chained request: previous_response_id={ahead.anchor}, sends 1 of 5 blocks"]
    else:
        assert ahead.conversation == sent["conversation"] and ahead.anchor is None
        assert plan_lines(ahead, 5) == [f"conversation request: conversation={ahead.conversation}, sends 1 of 5 blocks"]


async def test_a_turn_the_engine_cannot_send_says_why(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]))
    engine = ResponsesEngine("sim-1", api_key="k", base_url=geppetto_sim.openai_url)
    turn = gp.Turn()
    turn.append(gp.Block.user("weather?"))
    turn = await engine.run_inference(turn)
    plan = chained_plan(turn)
    assert plan.error and plan.sent_ids == []
    (line,) = plan_lines(plan, len(turn.blocks))
    assert line.startswith("no request can be sent now: the Turn ends with tool calls that have no result")
    assert turn_report(turn)["chained"]["error"] is True


def test_the_kill_switch_shows_in_the_prediction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEPPETTO_CHAINING", "off")
    turn = gp.Turn()
    turn.append(gp.Block.user("hi"))
    plan = chained_plan(turn)
    assert (plan.mode, plan.full, plan.reason) == ("stateless", True, "chaining is off (GEPPETTO_CHAINING=off)")
    assert plan_lines(plan, 1) == [
        "stateless request now: without server state, sends its 1 block (chaining is off (GEPPETTO_CHAINING=off))"
    ]
