"""Logs at seed 000's levels: DEBUG anchor and delta, INFO request sent / response received, WARNING
fallback and missing response id, ERROR a rejected chained request."""

from __future__ import annotations

import logging

import pytest
from responses_support import engine, forget

import geppetto as gp
from geppetto.simulator import Reply, Simulator
from geppetto.turns import BLOCK_META_RESPONSE_ID, Block, Turn

LOGGER = "geppetto.providers.openai_responses"


def _start() -> Turn:
    turn = Turn()
    turn.append(Block.user("hi"))
    return turn


def _records(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER]


async def test_a_chained_request_logs_anchor_request_and_response(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."))
    eng = engine(sim)
    turn = await eng.run_inference(_start())
    first = str(turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)])
    turn.append(Block.user("more"))
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        turn = await eng.run_inference(turn)
    second = str(turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)])
    records = _records(caplog)
    assert records[0] == ("DEBUG", f"responses: anchor {first}, 1 delta blocks, 1 items")
    assert records[1] == ("INFO", f"responses: chained request (previous_response_id={first}, 1 input item)")
    level, message = records[2]
    assert level == "INFO" and message.startswith(f"responses: response {second} received (completed, 1 output items, ")


async def test_a_rejected_chained_request_is_an_error_then_a_warned_fallback(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."))
    eng = engine(sim)
    turn = await eng.run_inference(_start())
    parent = str(turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)])
    forget(sim, parent)
    turn.append(Block.user("more"))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await eng.run_inference(turn)
    (error, warning) = _records(caplog)
    assert error == (
        "ERROR",
        f"responses: the server rejected the chained request (previous_response_id={parent}, 1 input item): "
        f"400 previous_response_not_found: Previous response with id '{parent}' not found.",
    )
    assert warning == (
        "WARNING",
        f"responses: parent {parent} not found on the server; sending the whole Turn "
        "(fallback: previous_response_not_found)",
    )


async def test_a_rejection_that_is_not_recovered_is_logged_and_raised(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."))
    eng = engine(sim, on_previous_not_found="raise")
    turn = await eng.run_inference(_start())
    forget(sim, str(turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]))
    turn.append(Block.user("more"))
    with caplog.at_level(logging.WARNING, logger=LOGGER), pytest.raises(gp.PreviousResponseNotFoundError):
        await eng.run_inference(turn)
    assert [level for level, _ in _records(caplog)] == ["ERROR"]


async def test_the_first_request_is_not_a_fallback(geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture) -> None:
    geppetto_sim.queue(Reply(text="One."))
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        await engine(geppetto_sim).run_inference(_start())
    assert [level for level, _ in _records(caplog)] == ["INFO", "INFO"]
    assert _records(caplog)[0][1] == "responses: stateless request (1 input item, whole Turn)"
