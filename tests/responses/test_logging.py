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
    assert records[0] == ("DEBUG", f"responses: anchor candidate {first} (blocks 1-1): valid: the anchor")
    assert records[1] == ("DEBUG", f"responses: anchor {first}, 1 delta blocks, 1 items")
    assert records[2] == ("INFO", f"responses: chained request (previous_response_id={first}, 1 input item)")
    level, message = records[3]
    assert level == "INFO" and message.startswith(f"responses: response {second} received (completed, 1 output items, ")
    assert records[4] == ("DEBUG", f"responses: tagged 1 blocks with response_id {second}")


async def test_each_anchor_candidate_is_logged_with_why_it_was_rejected(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    eng = engine(sim)
    turn = await eng.run_inference(_start())
    turn.append(Block.user("more"))
    turn = await eng.run_inference(turn)
    first, second = (str(turn.blocks[i].metadata[str(BLOCK_META_RESPONSE_ID)]) for i in (1, 3))
    turn.blocks[3].payload["text"] = "Two, edited."  # middleware edits the second answer
    turn.append(Block.user("again"))
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        await eng.run_inference(turn)
    debug = [m for level, m in _records(caplog) if level == "DEBUG" and "anchor candidate" in m]
    assert debug == [
        f"responses: anchor candidate {second} (blocks 3-3): rejected: fingerprint mismatch: the Turn before "
        "its end changed, or it was answered in another chain or conversation (fingerprint_mismatch)",
        f"responses: anchor candidate {first} (blocks 1-1): valid: the anchor",
    ]


async def test_a_fallback_warning_names_the_session_turn_and_inference(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."))
    session = gp.Session(engine(sim), session_id="s-logs")
    await session.run("hi")
    forget(sim, str(session.latest.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]))  # type: ignore[union-attr]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        out = await session.run("more")
    (warning,) = [m for level, m in _records(caplog) if level == "WARNING"]
    inference = out.metadata["geppetto.inference_id@v1"]
    assert warning.endswith(
        f"(fallback: previous_response_not_found; session=s-logs turn={out.id} inference={inference})"
    )


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
        f"(fallback: previous_response_not_found; session=- turn={turn.id} inference=-)",
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
    records = _records(caplog)
    assert [level for level, _ in records] == ["DEBUG", "INFO", "INFO", "DEBUG"]
    assert records[0][1] == "responses: anchor candidates: none (no block carries a response id)"
    assert records[1][1] == "responses: stateless request (1 input item, whole Turn)"
