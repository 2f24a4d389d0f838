"""The kill switch ``GEPPETTO_CHAINING=off`` (seed 000, rollout and rollback): every Responses request in
the process goes stateless with a logged reason, whatever the engine, profile or Turn asks for; the gauge
says whether chaining is on; switched on again, the Turn chains as before."""

from __future__ import annotations

import logging

import pytest
from responses_support import engine

import geppetto as gp
from geppetto.providers._stateful import chaining_gauge
from geppetto.providers.openai_responses import ResponsesMetrics, find_best_anchor, get_state
from geppetto.simulator import Reply, Simulator
from geppetto.turns import BLOCK_META_RESPONSE_ID, Block

LOGGER = "geppetto.providers.openai_responses"


def _bodies(sim: Simulator) -> list[dict]:  # type: ignore[type-arg]
    return [r.body for r in sim.requests if r.path == "/v1/responses"]


@pytest.mark.parametrize("mode", ["chained", "conversation"])
async def test_off_sends_every_request_stateless_with_a_logged_reason(
    geppetto_sim: Simulator, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    m = ResponsesMetrics()
    session = gp.Session(engine(sim, mode=mode, metrics=m), session_id="s-off")  # built before the switch
    monkeypatch.setenv("GEPPETTO_CHAINING", "off")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        await session.run("hi")
        out = await session.run("more")
    bodies = _bodies(sim)
    assert all("previous_response_id" not in b and "conversation" not in b for b in bodies)
    assert [len(b["input"]) for b in bodies] == [1, 3]  # the whole Turn each time
    assert not [r for r in sim.requests if r.path.startswith("/v1/conversations")]
    assert m.snapshot()["counters"] == {"stateless": 2}  # not fallbacks: nothing was tried and lost
    reasons = [r.getMessage() for r in caplog.records if r.name == LOGGER and "chaining is off" in r.getMessage()]
    assert len(reasons) == 2
    assert reasons[1] == (
        f"responses: chaining is off (GEPPETTO_CHAINING=off): a stateless request instead of a {mode} one "
        f"(session=s-off turn={out.id} inference={out.metadata['geppetto.inference_id@v1']})"
    )
    assert m.snapshot()["chaining_enabled"] == 0.0
    assert get_state(out).mode == mode  # type: ignore[union-attr]  # the Turn keeps the mode it asked for

    # Switched on again: the Turn chains on the stateless answer (its server context is the whole Turn),
    # or, in conversation mode, starts a conversation with the whole Turn.
    monkeypatch.delenv("GEPPETTO_CHAINING")
    assert m.snapshot()["chaining_enabled"] == 1.0
    await session.run("again")
    last = _bodies(sim)[-1]
    if mode == "chained":
        assert last["previous_response_id"] == BLOCK_META_RESPONSE_ID.get(out.blocks[-1].metadata)
        assert len(last["input"]) == 1
    else:
        assert "conversation" in last


async def test_the_switch_reads_the_environment_on_every_request(
    geppetto_sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."))
    eng = engine(sim, mode="chained")
    session = gp.Session(eng)
    await session.run("hi")
    monkeypatch.setenv("GEPPETTO_CHAINING", "OFF")
    out = await session.run("more")
    assert "previous_response_id" not in _bodies(sim)[-1]
    assert find_best_anchor(out) == BLOCK_META_RESPONSE_ID.get(out.blocks[-1].metadata)  # still tagged


@pytest.mark.parametrize(("value", "on"), [("off", False), ("0", False), ("false", False), ("on", True), ("", True)])
def test_the_gauge_says_whether_chaining_is_on(monkeypatch: pytest.MonkeyPatch, value: str, on: bool) -> None:
    monkeypatch.setenv("GEPPETTO_CHAINING", value)
    assert chaining_gauge() == (1.0 if on else 0.0)


async def test_a_value_it_does_not_know_is_an_error_naming_the_fix(
    geppetto_sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEPPETTO_CHAINING", "of")
    turn = gp.Turn()
    turn.append(Block.user("hi"))
    with pytest.raises(gp.ConfigurationError, match=r"GEPPETTO_CHAINING='of' is not understood: set it to 'off'"):
        await engine(geppetto_sim).run_inference(turn)
    assert chaining_gauge() == 0.0  # nothing chains while every request fails


def test_the_gauge_is_exported_to_prometheus(monkeypatch: pytest.MonkeyPatch) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    registry = prometheus_client.CollectorRegistry()
    ResponsesMetrics(registry=registry)
    assert registry.get_sample_value("geppetto_responses_chaining_enabled") == 1.0
    monkeypatch.setenv("GEPPETTO_CHAINING", "off")
    assert registry.get_sample_value("geppetto_responses_chaining_enabled") == 0.0
