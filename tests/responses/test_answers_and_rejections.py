"""Seed 000's edge case 4 and failure mode 2: a response that carries no id, and a chained request the
server rejects with a 400 that is not an expired parent (it is raised, never answered by a resend)."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

import geppetto as gp
from geppetto.providers._http import HttpTransport
from geppetto.providers._retry import RetryPolicy
from geppetto.providers.openai_responses import ResponsesEngine, ResponsesMetrics, find_best_anchor, get_state
from geppetto.turns import BLOCK_META_RESPONSE_ID, Block, Turn

LOGGER = "geppetto.providers.openai_responses"


def _sse(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _answer(rid: str | None, text: str, previous: str | None) -> httpx.Response:
    created: dict[str, Any] = {"object": "response", "status": "in_progress", "output": []}
    created["previous_response_id"] = previous
    if rid is not None:
        created["id"] = rid
    message = {
        "type": "message",
        "id": f"msg_{text}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    final = {**created, "status": "completed", "output": [message]}
    body = _sse({"type": "response.created", "response": created}, {"type": "response.completed", "response": final})
    return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})


def _engine(answers: list[Any], metrics: ResponsesMetrics) -> tuple[ResponsesEngine, list[dict[str, Any]]]:
    """An engine whose server answers request ``i`` with ``answers[i](body)``; the bodies land in the list."""
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return answers[len(bodies) - 1](bodies[-1])  # type: ignore[no-any-return]

    http = HttpTransport(
        "http://test/v1", provider="openai", transport=httpx.MockTransport(handler), retry=RetryPolicy(max_retries=0)
    )
    return ResponsesEngine("gpt-4.1", api_key="k", http=http, metrics=metrics), bodies


def _turn() -> Turn:
    turn = Turn(id="t-edge")
    turn.append(Block.user("hi"))
    return turn


async def test_a_response_without_an_id_leaves_nothing_to_anchor_on(caplog: pytest.LogCaptureFixture) -> None:
    m = ResponsesMetrics()
    eng, bodies = _engine(
        [lambda b: _answer(None, "One", b.get("previous_response_id")), lambda b: _answer("resp_2", "Two", None)], m
    )
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        turn = await eng.run_inference(_turn())
    assert turn.blocks[-1].text == "One"
    assert BLOCK_META_RESPONSE_ID.get(turn.blocks[-1].metadata) is None  # nothing tagged
    assert get_state(turn) is None and find_best_anchor(turn) is None  # no state names a response
    (warning,) = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert warning == (
        "responses: the response carried no id; its blocks cannot anchor a later request "
        "(session=- turn=t-edge inference=-)"
    )
    # the next request sends the whole Turn, as a first request (not counted as a fallback)
    turn.append(Block.user("more"))
    await eng.run_inference(turn)
    assert "previous_response_id" not in bodies[1]
    assert [i.get("content") for i in bodies[1]["input"]] == ["hi", "One", "more"]
    assert m.snapshot()["counters"] == {"stateless": 2}
    assert find_best_anchor(turn) == "resp_2"


async def test_a_chained_request_rejected_with_another_400_is_raised_not_resent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def rejected(body: dict[str, Any]) -> httpx.Response:
        error = {
            "message": "Invalid value for 'temperature': must be at most 2.",
            "type": "invalid_request_error",
            "param": "temperature",
            "code": "invalid_value",
        }
        return httpx.Response(400, json={"error": error})

    m = ResponsesMetrics()
    eng, bodies = _engine([lambda b: _answer("resp_1", "One", None), rejected], m)
    turn = await eng.run_inference(_turn())
    turn.append(Block.user("more"))
    before = [b.id for b in turn.blocks]
    with caplog.at_level(logging.WARNING, logger=LOGGER), pytest.raises(gp.BadRequestError) as info:
        await eng.run_inference(turn)
    assert not isinstance(info.value, gp.PreviousResponseNotFoundError)
    assert (info.value.status, info.value.code, info.value.param) == (400, "invalid_value", "temperature")
    assert len(bodies) == 2 and bodies[1]["previous_response_id"] == "resp_1"  # sent once, never resent whole
    assert [b.id for b in turn.blocks] == before  # nothing appended
    assert get_state(turn).previous_response_id == "resp_1"  # type: ignore[union-attr]
    assert find_best_anchor(turn) == "resp_1"  # the chain is intact for a retry
    assert "fallback" not in m.snapshot()["counters"]
    (error,) = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER]
    assert error == (
        "ERROR",
        "responses: the server rejected the chained request (previous_response_id=resp_1, 1 input item): "
        "400 invalid_value: Invalid value for 'temperature': must be at most 2.",
    )
