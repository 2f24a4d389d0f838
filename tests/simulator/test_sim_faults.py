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


FAULT_KEYS = (
    "use key=value with keys: compat, deep_after, drop_after, error_after, finish_after_cut, finish_delay, "
    "forget, huge_after, huge_bytes, malformed_after, retry_after, slow_first_byte, stall_after, stall_seconds, "
    "status (compat and finish_after_cut take 1 or 0)."
)


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ("status=99", ": status must be an HTTP error status from 400 to 599, got 99"),
        ("status=600", ": status must be an HTTP error status from 400 to 599, got 600"),
        ("status=200", ": status must be an HTTP error status from 400 to 599, got 200"),
        ("status=abc", ""),
        ("retry_after=-1", ": retry_after must be a finite number of seconds, 0 or more, got -1.0"),
        ("retry_after=nan", ": retry_after must be a finite number of seconds, 0 or more, got nan"),
        ("drop_after=-2", ": drop_after must be 0 or more, got -2"),
        ("compat=maybe", ""),
        ("forget=", ""),
    ],
)
def test_bad_fault_header_values_get_400_naming_the_header(
    oai: httpx.Client, geppetto_sim: Simulator, header: str, reason: str
) -> None:
    r = oai.post("/responses", json=HELLO, headers={"x-sim-fault": header})
    assert r.status_code == 400
    assert r.json() == {
        "error": {
            "message": f"Invalid x-sim-fault header part '{header}'{reason}; {FAULT_KEYS}",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }
    assert oai.post("/responses", json=HELLO).status_code == 200
    assert len(geppetto_sim.requests) == 2


@pytest.mark.parametrize("status", [99, 200, 302, 600])
def test_fail_next_rejects_non_error_statuses(geppetto_sim: Simulator, status: int) -> None:
    with pytest.raises(ValueError, match=f"status must be an HTTP error status from 400 to 599, got {status}"):
        geppetto_sim.fail_next(status)


def test_forget_per_request_and_queued(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    first = oai.post("/responses", json=HELLO).json()
    kept = oai.post("/responses", json=HELLO).json()
    r = oai.post(
        "/responses",
        json={**HELLO, "previous_response_id": first["id"]},
        headers={"x-sim-fault": f"forget={first['id']}"},
    )
    assert (r.status_code, r.json()["error"]["code"]) == (400, "previous_response_not_found")
    assert oai.get(f"/responses/{first['id']}").status_code == 404
    assert oai.post("/responses", json={**HELLO, "previous_response_id": kept["id"]}).status_code == 200
    geppetto_sim.fail_next(forget=kept["id"])
    r = oai.post("/responses", json={**HELLO, "previous_response_id": kept["id"]})
    assert r.json()["error"]["message"] == f"Previous response with id '{kept['id']}' not found."


def test_compat_per_request_and_queued(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    chained = {**HELLO, "previous_response_id": "resp_unknown"}
    r = oai.post("/responses", json=chained, headers={"x-sim-fault": "compat=1"})
    assert r.status_code == 200
    body = r.json()
    assert (body["previous_response_id"], body["store"]) == (None, False)
    assert oai.get(f"/responses/{body['id']}").status_code == 404
    assert oai.post("/responses", json=chained).json()["error"]["code"] == "previous_response_not_found"
    geppetto_sim.fail_next(compat=True)
    assert oai.post("/responses", json=chained).status_code == 200
    assert oai.post("/responses", json=chained).status_code == 400
    assert oai.post("/responses", json=chained, headers={"x-sim-fault": "compat=0"}).status_code == 400


def _stream_events(client: httpx.Client, header: str, timeout: float = 10) -> tuple[list[bytes], Exception | None]:
    received: list[bytes] = []
    try:
        with client.stream(
            "POST", "/responses", json={**HELLO, "stream": True}, headers={"x-sim-fault": header}, timeout=timeout
        ) as r:
            for chunk in r.iter_bytes():
                received.append(chunk)
    except (httpx.RemoteProtocolError, httpx.ReadTimeout) as err:
        return received, err
    return received, None


def test_stream_faults_by_header(oai: httpx.Client) -> None:
    received, err = _stream_events(oai, "drop_after=2")
    assert isinstance(err, httpx.RemoteProtocolError)
    assert [n for n, _ in sse_events(b"".join(received).decode())] == ["response.created", "response.in_progress"]
    received, err = _stream_events(oai, "malformed_after=1")
    blocks = b"".join(received).decode().strip().split("\n\n")
    assert err is None and blocks[1] == "data: {this is not json" and blocks[-1].startswith("event: response.completed")
    received, err = _stream_events(oai, "stall_after=1;stall_seconds=30", timeout=3)
    assert isinstance(err, httpx.ReadTimeout)
    assert [n for n, _ in sse_events(b"".join(received).decode())] == ["response.created"]


def test_429_by_header_carries_retry_after_headers(oai: httpx.Client) -> None:
    r = oai.post("/responses", json=HELLO, headers={"x-sim-fault": "status=429;retry_after=2"})
    assert r.status_code == 429
    assert (r.headers["retry-after"], r.headers["retry-after-ms"]) == ("2", "2000")
    assert r.json()["error"]["code"] == "rate_limit_exceeded"


def test_anthropic_429_says_when_to_retry_by_default(geppetto_sim: Simulator) -> None:
    body = {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    url = geppetto_sim.url + "/v1/messages"
    r = httpx.post(url, json=body, headers={"x-api-key": "k", "x-sim-fault": "status=429"})
    assert r.status_code == 429
    assert r.headers["retry-after"] == "1" and "retry-after-ms" not in r.headers
    assert r.json()["error"] == {
        "type": "rate_limit_error",
        "message": "Number of requests has exceeded your rate limit.",
    }
    geppetto_sim.fail_next(429, retry_after=0.5)
    r = httpx.post(url, json=body, headers={"x-api-key": "k"})
    assert (r.headers["retry-after"], r.headers["retry-after-ms"]) == ("0.5", "500")


def test_server_errors_per_provider_and_queued_in_order(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    r = oai.post("/responses", json=HELLO, headers={"x-sim-fault": "status=503"})
    assert (r.status_code, r.headers["x-should-retry"]) == (503, "true")
    assert r.json() == {
        "error": {
            "message": "The engine is currently overloaded, please try again later.",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }
    body = {"model": "c", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}
    r = httpx.post(
        geppetto_sim.url + "/v1/messages", json=body, headers={"x-api-key": "k", "x-sim-fault": "status=500"}
    )
    assert r.status_code == 500
    assert r.json()["error"] == {"type": "api_error", "message": "Internal server error"}
    geppetto_sim.fail_next(500)
    geppetto_sim.fail_next(503)
    assert [oai.post("/responses", json=HELLO).status_code for _ in range(3)] == [500, 503, 200]


def test_gemini_rate_limit_and_server_error_envelopes(geppetto_sim: Simulator) -> None:
    url = geppetto_sim.url + "/v1beta/models/gemini-2.0-flash:generateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "x"}]}]}
    geppetto_sim.fail_next(429, retry_after=1)
    geppetto_sim.fail_next(500)
    r = httpx.post(url, json=body, headers={"x-goog-api-key": "k"})
    assert (r.status_code, r.headers["retry-after"]) == (429, "1")
    assert r.json() == {
        "error": {
            "code": 429,
            "message": "Resource has been exhausted (e.g. check quota).",
            "status": "RESOURCE_EXHAUSTED",
        }
    }
    r = httpx.post(url, json=body, headers={"x-goog-api-key": "k"})
    assert r.json() == {
        "error": {
            "code": 500,
            "message": "An internal error has occurred. Please retry or report in "
            "https://developers.generativeai.google/guide/troubleshooting",
            "status": "INTERNAL",
        }
    }
    assert httpx.post(url, json=body, headers={"x-goog-api-key": "k"}).status_code == 200


async def _play(stream: object, log: list[str]) -> list[str]:
    """Run an SSEStream ASGI app, recording each frame sent in ``log`` (where its callbacks write too)."""

    async def send(message: dict[str, object]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            log.append(f"frame {message['body']!r}")

    async def receive() -> dict[str, object]:
        return {"type": "http.disconnect"}

    await stream({"type": "http"}, receive, send)  # type: ignore[operator]
    return log


async def test_a_stream_commits_its_response_before_the_final_frame() -> None:
    """A client that reads the final event may chain from the response at once: it is stored by then."""
    from geppetto.simulator._faults import Fault, SSEStream

    def stream(fault: Fault | None, log: list[str]) -> SSEStream:
        return SSEStream(
            [b"a", b"b", b"c"],
            fault,
            lambda: False,
            on_complete=lambda: log.append("commit"),
            on_abort=lambda: log.append("abort"),
        )

    log: list[str] = []
    await _play(stream(None, log), log)
    assert log == ["frame b'a'", "frame b'b'", "commit", "frame b'c'"]
    log = []
    await _play(stream(Fault(drop_after=2), log), log)
    assert log == ["frame b'a'", "frame b'b'", "abort"]  # cut before the end: nothing stored
