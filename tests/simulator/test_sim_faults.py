"""Fault injection: statuses with retry headers per provider, dropped/stalled/malformed streams, slow first byte."""

from __future__ import annotations

import httpx
import pytest
from simhelp import sse_events

from geppetto.simulator import Simulator

HELLO = {"model": "sim-1", "input": "hi"}


def test_queued_429_then_success(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(429, retry_after=0.25, times=2)
    for _ in range(2):
        r = oai.post("/responses", json=HELLO)
        assert r.status_code == 429
        assert (r.headers["retry-after"], r.headers["retry-after-ms"]) == ("0.25", "250")
        assert r.json() == {
            "error": {
                "message": "Rate limit reached for requests. Please try again later.",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        }
    assert oai.post("/responses", json=HELLO).status_code == 200
    assert len(geppetto_sim.requests) == 3


def test_header_fault_and_provider_shapes(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    r = oai.post("/responses", json=HELLO, headers={"x-sim-fault": "status=500"})
    assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"
    r = oai.post("/responses", json=HELLO, headers={"x-sim-fault": "bogus=1"})
    assert r.status_code == 400 and "x-sim-fault" in r.json()["error"]["message"]
    anthropic = httpx.post(
        geppetto_sim.url + "/v1/messages",
        json={"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
        headers={"x-api-key": "k", "x-sim-fault": "status=529"},
    )
    assert anthropic.status_code == 529
    assert anthropic.headers["x-should-retry"] == "true"
    assert anthropic.json()["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    gemini = httpx.post(
        geppetto_sim.url + "/v1beta/models/g:generateContent",
        json={"contents": [{"parts": [{"text": "x"}]}]},
        headers={"x-goog-api-key": "k", "x-sim-fault": "status=503"},
    )
    assert gemini.json() == {
        "error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}
    }


def test_drop_after_n_events_stores_nothing(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(drop_after=3)
    received: list[bytes] = []
    with (
        pytest.raises(httpx.RemoteProtocolError),
        oai.stream("POST", "/responses", json={**HELLO, "stream": True}) as r,
    ):
        for chunk in r.iter_bytes():
            received.append(chunk)
    events = sse_events(b"".join(received).decode())
    assert [name for name, _ in events] == ["response.created", "response.in_progress", "response.output_item.added"]
    response_id = events[0][1]["response"]["id"]
    assert oai.get(f"/responses/{response_id}").status_code == 404


def test_drop_non_stream_response(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(drop_after=0)
    with pytest.raises(httpx.RemoteProtocolError):
        oai.post("/responses", json=HELLO)
    assert oai.post("/responses", json=HELLO).status_code == 200


def test_malformed_event(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(malformed_after=1)
    with oai.stream("POST", "/responses", json={**HELLO, "stream": True}) as r:
        text = r.read().decode()
    blocks = text.strip().split("\n\n")
    assert blocks[1] == "data: {this is not json"
    assert blocks[-1].startswith("event: response.completed")


def test_stall_times_out_client_and_slow_first_byte_still_answers(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(stall_after=2, stall_seconds=2)
    with (
        pytest.raises(httpx.ReadTimeout),
        oai.stream("POST", "/responses", json={**HELLO, "stream": True}, timeout=0.3) as r,
    ):
        r.read()
    geppetto_sim.fail_next(slow_first_byte=0.05)
    with oai.stream(
        "POST", "/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True}
    ) as r:
        assert sse_events(r.read().decode())[-1] == (None, "[DONE]")


def test_mid_stream_error_events(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(error_after=2)
    with oai.stream("POST", "/responses", json={**HELLO, "stream": True}) as r:
        events = sse_events(r.read().decode())
    assert events[-1] == (
        "error",
        {
            "type": "error",
            "code": "server_error",
            "message": "The server had an error while processing your request. Sorry about that!",
            "param": None,
            "sequence_number": 2,
        },
    )
    assert len(events) == 3
    assert oai.get(f"/responses/{events[0][1]['response']['id']}").status_code == 404
    body = {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "stream": True}
    headers = {"x-api-key": "k", "x-sim-fault": "error_after=1"}
    with httpx.stream("POST", geppetto_sim.url + "/v1/messages", json=body, headers=headers) as r:
        events = sse_events(r.read().decode())
    assert [name for name, _ in events] == ["message_start", "error"]
    assert events[-1][1] == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
