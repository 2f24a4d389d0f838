"""``geppetto serve`` with a background engine (``ResponsesEngine(background=True)``), two worker processes on
one PostgreSQL store and one Redis bus: the worker running an inference is killed (SIGKILL) mid-answer and
the other finishes it from the persisted response id and cursor, a client reading ``/events`` with
``Last-Event-ID`` sees every event once; a client's stop cancels the response, a disconnect does not."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import Worker, bus_url, sse_events, two_script_workers

from geppetto.simulator import Reply, Simulator
from geppetto.turns import BLOCK_META_RESPONSE_ID

ANSWER = " ".join(f"w{i}" for i in range(120))
SCRIPT = str(Path(__file__).with_name("background_worker.py"))


@pytest.fixture
def two_workers(postgres_target: str, geppetto_sim: Simulator) -> Iterator[tuple[Worker, Worker]]:
    args = [SCRIPT, postgres_target, bus_url("redis"), geppetto_sim.openai_url]
    with two_script_workers(*args) as workers:
        yield workers


def _read(url: str, sid: str, last_id: str, *, stop_after_deltas: int | None = None) -> list[dict[str, Any]]:
    """The session's events after ``last_id`` (sent as ``Last-Event-ID``) up to ``run_finished``, or until
    ``stop_after_deltas`` text deltas arrived (then the client disconnects)."""
    out: list[dict[str, Any]] = []
    with httpx.stream(
        "GET",
        f"{url}/api/sessions/{sid}/events",
        params={"until": "finished"},
        headers={"Last-Event-ID": last_id},
        timeout=60,
    ) as response:
        assert response.status_code == 200
        for event in sse_events(response.iter_lines()):
            out.append(event)
            deltas = sum(e["event"] == "text_delta" for e in out)
            if stop_after_deltas is not None and deltas >= stop_after_deltas:
                break
    return out


def _deltas(events: list[dict[str, Any]]) -> str:
    return "".join(e["data"].get("delta", "") for e in events if e["event"] == "text_delta")


def killed_mid_answer(a: Worker, b: Worker, sim: Simulator) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """Worker ``a`` starts a long background answer, a client reads ten deltas through ``b``, then ``a`` is
    killed (SIGKILL) and the client reads on from ``b`` after the last event it had: the session id, the
    started run and every event the client saw, checked to hold each event and delta once."""
    sim.background_pace = 0.02  # about 3 s for the whole answer
    sim.queue(Reply(text=ANSWER))
    sid = httpx.post(f"{b.url}/api/sessions", json={}).json()["id"]
    started = httpx.post(f"{a.url}/api/sessions/{sid}/messages", json={"text": "Tell me a long story"}).json()
    before = _read(b.url, sid, started["after"], stop_after_deltas=10)  # the client reads, then loses its worker
    a.kill()
    assert "run_finished" not in [e["event"] for e in before]
    after = _read(b.url, sid, before[-1]["id"])
    events = before + after
    ids = [e["id"] for e in events]
    assert len(ids) == len(set(ids)), "no event twice"
    assert [e["event"] for e in events].count("start") == 1, "the engine's start once: the pickup adds none"
    assert _deltas(events) == ANSWER, "every delta once, in order, none lost"
    return sid, started, events


def assert_finished_and_chained(url: str, sid: str, sim: Simulator, anchor: str, field: str) -> None:
    """The session holds the whole answer, stamped with the server's id ``anchor``, and its next message is
    chained on it (``field`` of the next request body)."""
    session = httpx.get(f"{url}/api/sessions/{sid}").json()
    assert [i["status"] for i in session["inferences"]] == ["completed"]
    blocks = session["latest"]["blocks"]
    assert [(blk["kind"], blk["payload"]["text"]) for blk in blocks] == [
        ("user", "Tell me a long story"),
        ("llm_text", ANSWER),
    ]
    assert blocks[-1]["metadata"][str(BLOCK_META_RESPONSE_ID)] == anchor
    sim.queue(Reply(text="The end."))
    again = httpx.post(f"{url}/api/sessions/{sid}/messages", json={"text": "And then?"}).json()
    assert _read(url, sid, again["after"])[-1]["data"]["status"] == "completed"
    assert sim.requests[-1].body[field] == anchor


def test_a_killed_workers_background_run_is_finished_by_another(
    two_workers: tuple[Worker, Worker], geppetto_sim: Simulator
) -> None:
    a, b = two_workers
    sid, started, events = killed_mid_answer(a, b, geppetto_sim)
    assert [e["event"] for e in events].count("run_started") == 1
    finished = events[-1]
    assert finished["event"] == "run_finished"
    assert (finished["data"]["inference_id"], finished["data"]["status"]) == (started["inference_id"], "completed")
    # one response: created by the dead worker, read on by the other after what had been published
    posts = [r for r in geppetto_sim.requests if r.method == "POST" and r.path == "/v1/responses"]
    resumes = [r for r in geppetto_sim.requests if r.method == "GET"]
    assert len(posts) == 1 and resumes and all(r.query.get("stream") == "true" for r in resumes)
    rid = resumes[0].path.rsplit("/", 1)[-1]
    assert int(resumes[0].query["starting_after"]) >= 13, "picked up after what had been published, not from 0"
    session = httpx.get(f"{b.url}/api/sessions/{sid}").json()
    assert session["snapshot_count"] == 1 and session["status"] == "idle"
    # the session goes on chained on that response
    assert_finished_and_chained(b.url, sid, geppetto_sim, rid, "previous_response_id")


def test_a_stop_cancels_the_background_response_and_a_disconnect_does_not(
    two_workers: tuple[Worker, Worker], geppetto_sim: Simulator
) -> None:
    a, b = two_workers
    geppetto_sim.background_pace = 0.01
    geppetto_sim.queue(Reply(text="short answer " * 20), Reply(text=ANSWER))
    sid = httpx.post(f"{b.url}/api/sessions", json={}).json()["id"]
    # a client that disconnects mid-answer leaves the run going: it completes, nothing is cancelled
    first = httpx.post(f"{a.url}/api/sessions/{sid}/messages", json={"text": "one"}).json()
    _read(a.url, sid, first["after"], stop_after_deltas=3)
    deadline = time.monotonic() + 30
    while httpx.get(f"{b.url}/api/sessions/{sid}").json()["status"] != "idle" and time.monotonic() < deadline:
        time.sleep(0.05)
    session = httpx.get(f"{b.url}/api/sessions/{sid}").json()
    assert [i["status"] for i in session["inferences"]] == ["completed"]
    assert not [r for r in geppetto_sim.requests if r.path.endswith("/cancel")]
    # a client's stop (sent to the other worker) cancels the response on the server
    geppetto_sim.background_pace = 0.05
    second = httpx.post(f"{a.url}/api/sessions/{sid}/messages", json={"text": "two"}).json()
    _read(b.url, sid, second["after"], stop_after_deltas=2)
    assert httpx.post(f"{b.url}/api/sessions/{sid}/cancel").status_code == 202
    events = _read(b.url, sid, second["after"])
    assert (events[-1]["data"]["inference_id"], events[-1]["data"]["status"]) == (second["inference_id"], "cancelled")
    cancels = [r.path for r in geppetto_sim.requests if r.path.endswith("/cancel")]
    assert len(cancels) == 1
    logged = [e["data"] for e in events if e["event"] == "log"]
    assert logged and logged[-1]["fields"]["status"] == "cancelled", "the usage of what was produced is published"
    assert logged[-1]["fields"]["response_id"] == cancels[0].split("/")[-2]
