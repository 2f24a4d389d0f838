"""Two ``geppetto serve`` worker processes on one PostgreSQL store and one broker (Redis Streams or NATS
JetStream): a prompt to one, its events from the other, one inference per session across both, a cancel
sent to the other worker, and a worker killed mid-inference that leaves the session usable."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from server_support import Worker, bus_url, sse_events, write_sim_profile

from geppetto.simulator import Simulator


def events(url: str, session_id: str, after: str, **headers: str) -> list[dict[str, Any]]:
    with httpx.stream(
        "GET",
        f"{url}/api/sessions/{session_id}/events",
        params={"after": after, "until": "finished"},
        headers=headers,
        timeout=60,
    ) as response:
        assert response.status_code == 200
        return list(sse_events(response.iter_lines()))


@pytest.fixture(params=["redis", "nats"])
def workers(request: pytest.FixtureRequest, postgres_target: str, geppetto_sim: Simulator) -> Iterator[list[Worker]]:
    bus = bus_url(request.param)
    write_sim_profile(geppetto_sim)
    args = ["--profile", "simtest", "--store", postgres_target, "--bus", bus]
    started: list[Worker] = []
    try:
        started.append(Worker(*args))
        started.append(Worker(*args))
        yield started
    finally:
        for worker in started:
            worker.stop()


def test_prompt_on_one_worker_events_from_the_other(workers: list[Worker], geppetto_sim: Simulator) -> None:
    a, b = workers
    sid = httpx.post(f"{a.url}/api/sessions", json={}).json()["id"]
    for text in ("Hello", "Tell me more", "And the weather in Paris?"):
        started = httpx.post(f"{a.url}/api/sessions/{sid}/messages", json={"text": text})
        assert started.status_code == 202
        after = started.json()["after"]
        from_b = events(b.url, sid, after)
        from_a = events(a.url, sid, after)
        assert from_b == from_a, "both workers read the same log"
        ids = [e["id"] for e in from_b]
        assert len(ids) == len(set(ids)), "no event twice"
        assert from_b[0]["event"] == "run_started"
        assert from_b[-1]["data"]["status"] == "completed"
        assert {e["data"]["inference_id"] for e in from_b} == {started.json()["inference_id"]}
    session = httpx.get(f"{b.url}/api/sessions/{sid}").json()
    assert session["snapshot_count"] == 3 and session["status"] == "idle"
    # chained on the store's state: the third request sent only what the simulator had not seen
    assert geppetto_sim.requests[-1].body.get("previous_response_id")


def test_one_inference_per_session_across_workers_and_a_cancel_from_the_other(
    workers: list[Worker], geppetto_sim: Simulator
) -> None:
    a, b = workers
    sid = httpx.post(f"{a.url}/api/sessions", json={}).json()["id"]
    geppetto_sim.fail_next(slow_first_byte=30)
    started = httpx.post(f"{a.url}/api/sessions/{sid}/messages", json={"text": "Hello"}).json()
    for worker in (b, a):
        busy = httpx.post(f"{worker.url}/api/sessions/{sid}/messages", json={"text": "again"})
        assert busy.status_code == 409 and busy.json()["error"]["type"] == "session_busy"
    assert httpx.post(f"{b.url}/api/sessions/{sid}/cancel").status_code == 202
    finished = events(b.url, sid, started["after"])[-1]["data"]
    assert (finished["inference_id"], finished["status"]) == (started["inference_id"], "cancelled")
    again = httpx.post(f"{b.url}/api/sessions/{sid}/messages", json={"text": "Hello"}).json()
    assert events(a.url, sid, again["after"])[-1]["data"]["status"] == "completed"


def test_a_worker_killed_mid_inference_leaves_the_session_usable(
    workers: list[Worker], geppetto_sim: Simulator
) -> None:
    a, b = workers
    sid = httpx.post(f"{b.url}/api/sessions", json={}).json()["id"]
    first = httpx.post(f"{a.url}/api/sessions/{sid}/messages", json={"text": "Hello"}).json()
    assert events(b.url, sid, first["after"])[-1]["data"]["status"] == "completed"
    geppetto_sim.fail_next(slow_first_byte=30)
    doomed = httpx.post(f"{a.url}/api/sessions/{sid}/messages", json={"text": "This one dies"}).json()
    assert httpx.get(f"{b.url}/api/sessions/{sid}").json()["status"] == "running"
    a.kill()
    retry = httpx.post(f"{b.url}/api/sessions/{sid}/messages", json={"text": "Hello again"})
    assert retry.status_code == 202, retry.text
    after_kill = events(b.url, sid, doomed["after"], **{"Last-Event-ID": doomed["after"]})
    finished = [e["data"] for e in after_kill if e["event"] == "run_finished"]
    # the dead worker's inference is marked failed before the new one starts; then the new one completes
    assert finished[0]["inference_id"] == doomed["inference_id"] and finished[0]["status"] == "failed"
    assert "stopped before it ended" in finished[0]["error"]
    rest = (
        events(b.url, sid, after_kill[-1]["id"]) if finished[-1]["inference_id"] != retry.json()["inference_id"] else []
    )
    statuses = [*finished, *[e["data"] for e in rest if e["event"] == "run_finished"]]
    assert statuses[-1]["inference_id"] == retry.json()["inference_id"] and statuses[-1]["status"] == "completed"
    session = httpx.get(f"{b.url}/api/sessions/{sid}").json()
    assert [i["status"] for i in session["inferences"]] == ["completed", "failed", "completed"]
    assert session["snapshot_count"] == 2, "the killed inference saved nothing; the others did"


def test_a_killed_workers_run_is_settled_by_the_others_sweep_without_a_new_prompt(
    postgres_target: str, geppetto_sim: Simulator
) -> None:
    write_sim_profile(geppetto_sim)
    args = ["--profile", "simtest", "--store", postgres_target, "--bus", bus_url("redis"), "--sweep-interval", "0.2"]
    a = Worker(*args)
    b = Worker(*args)
    try:
        sid = httpx.post(f"{b.url}/api/sessions", json={}).json()["id"]
        geppetto_sim.fail_next(slow_first_byte=30)
        doomed = httpx.post(f"{a.url}/api/sessions/{sid}/messages", json={"text": "This one dies"}).json()
        a.kill()
        deadline = time.monotonic() + 30  # well past two sweeps; a reader used to wait for the next prompt
        with httpx.stream(
            "GET", f"{b.url}/api/sessions/{sid}/events", params={"after": doomed["after"]}, timeout=30
        ) as response:

            def lines() -> Iterator[str]:
                for line in response.iter_lines():  # keep-alive comments included
                    assert time.monotonic() < deadline, "no run_finished for the dead worker's run"
                    yield line

            event = next((e for e in sse_events(lines()) if e.get("event") == "run_finished"), None)
        assert event is not None, "the stream ended with no run_finished for the dead worker's run"
        assert (event["data"]["inference_id"], event["data"]["status"]) == (doomed["inference_id"], "failed")
        assert "stopped before it ended" in event["data"]["error"]
    finally:
        a.stop()
        b.stop()
