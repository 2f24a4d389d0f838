"""Stream faults on every streaming API (Chat, Anthropic, Gemini, Responses) and a measurable slow first byte."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from simhelp import sse_events

from geppetto.simulator import Simulator

# api -> (path, headers, a streaming request body).
STREAMS: dict[str, tuple[str, dict[str, str], dict[str, Any]]] = {
    "responses": ("/v1/responses", {"authorization": "Bearer k"}, {"model": "m", "input": "one two", "stream": True}),
    "chat": (
        "/v1/chat/completions",
        {"authorization": "Bearer k"},
        {"model": "m", "messages": [{"role": "user", "content": "one two"}], "stream": True},
    ),
    "anthropic": (
        "/v1/messages",
        {"x-api-key": "k"},
        {"model": "claude-sim", "max_tokens": 64, "messages": [{"role": "user", "content": "one two"}], "stream": True},
    ),
    "gemini": (
        "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
        {"x-goog-api-key": "k"},
        {"contents": [{"role": "user", "parts": [{"text": "one two"}]}]},
    ),
}


def _stream(
    sim: Simulator, api: str, header: str | None = None, timeout: float = 10
) -> tuple[list[tuple[str | None, Any]], str, Exception | None]:
    """(parsed events, raw text, the transport error that ended the stream or None)."""
    path, headers, body = STREAMS[api]
    if header is not None:
        headers = {**headers, "x-sim-fault": header}
    received: list[bytes] = []
    error: Exception | None = None
    try:
        with httpx.stream("POST", sim.url + path, json=body, headers=headers, timeout=timeout) as r:
            assert r.status_code == 200
            for chunk in r.iter_bytes():
                received.append(chunk)
    except (httpx.RemoteProtocolError, httpx.ReadTimeout) as err:
        error = err
    text = b"".join(received).decode()
    events = sse_events(text) if text.strip() and "{this is not json" not in text else []
    return events, text, error


@pytest.mark.parametrize("api", list(STREAMS))
def test_drop_after_cuts_every_stream(geppetto_sim: Simulator, api: str) -> None:
    complete, _, error = _stream(geppetto_sim, api)
    assert error is None and len(complete) > 3
    events, _, error = _stream(geppetto_sim, api, "drop_after=2")
    assert isinstance(error, httpx.RemoteProtocolError)
    assert len(events) == 2 and [n for n, _ in events] == [n for n, _ in complete[:2]]


@pytest.mark.parametrize("api", list(STREAMS))
def test_malformed_after_inserts_one_bad_event(geppetto_sim: Simulator, api: str) -> None:
    complete, _, _ = _stream(geppetto_sim, api)
    _, text, error = _stream(geppetto_sim, api, "malformed_after=1")
    assert error is None
    blocks = text.strip().split("\n\n")
    assert blocks[1] == "data: {this is not json"
    assert len(blocks) == len(complete) + 1
    rest = sse_events("\n\n".join(blocks[:1] + blocks[2:]))
    assert [n for n, _ in rest] == [n for n, _ in complete]
    assert rest[-1][0] == complete[-1][0] and type(rest[-1][1]) is type(complete[-1][1])


@pytest.mark.parametrize("api", list(STREAMS))
def test_stall_after_stops_sending(geppetto_sim: Simulator, api: str) -> None:
    complete, _, _ = _stream(geppetto_sim, api)
    events, _, error = _stream(geppetto_sim, api, "stall_after=1;stall_seconds=30", timeout=3)
    assert isinstance(error, httpx.ReadTimeout)
    assert [n for n, _ in events] == [complete[0][0]]


@pytest.mark.parametrize("api", ["responses", "gemini"])
def test_slow_first_byte_delays_streams(geppetto_sim: Simulator, api: str) -> None:
    delay = 0.4
    geppetto_sim.fail_next(slow_first_byte=delay)
    started = time.monotonic()
    events, _, error = _stream(geppetto_sim, api)
    assert time.monotonic() - started >= 0.8 * delay
    assert error is None and events


def test_slow_first_byte_delays_a_plain_answer(oai: httpx.Client) -> None:
    delay = 0.4
    started = time.monotonic()
    r = oai.post("/responses", json={"model": "m", "input": "x"}, headers={"x-sim-fault": f"slow_first_byte={delay}"})
    assert time.monotonic() - started >= 0.8 * delay
    assert r.status_code == 200 and r.json()["output"][0]["content"][0]["text"] == "You said: x"
