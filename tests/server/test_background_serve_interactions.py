"""``geppetto serve`` with ``InteractionsEngine(background=True)``, two worker processes on one PostgreSQL store
and one Redis bus: the worker running an inference is killed (SIGKILL) mid-answer and the other finishes
the same interaction after the event id that was published last, as for a background response; a client
reading ``/events`` with ``Last-Event-ID`` sees every event once."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from server_support import Worker, bus_url
from test_background_serve import SCRIPT, _deltas, _read

from geppetto.simulator import Reply, Simulator
from geppetto.turns import BLOCK_META_RESPONSE_ID

ANSWER = " ".join(f"w{i}" for i in range(120))
PATH = "/v1beta/interactions"


@pytest.fixture
def two_workers(postgres_target: str, geppetto_sim: Simulator) -> Iterator[tuple[Worker, Worker]]:
    args = [SCRIPT, postgres_target, bus_url("redis"), geppetto_sim.url, "interactions"]
    first = Worker(*args, script=True)
    try:
        second = Worker(*args, script=True)
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


def test_a_killed_workers_background_interaction_is_finished_by_another(
    two_workers: tuple[Worker, Worker], geppetto_sim: Simulator
) -> None:
    a, b = two_workers
    geppetto_sim.background_pace = 0.02
    geppetto_sim.queue(Reply(text=ANSWER))
    sid = httpx.post(f"{b.url}/api/sessions", json={}).json()["id"]
    started = httpx.post(f"{a.url}/api/sessions/{sid}/messages", json={"text": "Tell me a long story"}).json()
    before = _read(b.url, sid, started["after"], stop_after_deltas=10)
    a.kill()
    assert "run_finished" not in [e["event"] for e in before]
    after = _read(b.url, sid, before[-1]["id"])
    events = before + after
    ids = [e["id"] for e in events]
    assert len(ids) == len(set(ids)), "no event twice"
    assert [e["event"] for e in events].count("start") == 1, "the engine's start once: the pickup adds none"
    assert _deltas(events) == ANSWER, "every delta once, in order, none lost"
    assert (events[-1]["event"], events[-1]["data"]["status"]) == ("run_finished", "completed")
    posts = [r for r in geppetto_sim.requests if r.method == "POST" and r.path == PATH]
    resumes = [r for r in geppetto_sim.requests if r.method == "GET" and r.query.get("stream") == "true"]
    assert len(posts) == 1 and resumes and all(r.query.get("last_event_id") for r in resumes)
    iid = resumes[0].path.rsplit("/", 1)[-1]
    session = httpx.get(f"{b.url}/api/sessions/{sid}").json()
    assert [i["status"] for i in session["inferences"]] == ["completed"]
    blocks = session["latest"]["blocks"]
    assert [(blk["kind"], blk["payload"]["text"]) for blk in blocks] == [
        ("user", "Tell me a long story"),
        ("llm_text", ANSWER),
    ]
    assert blocks[-1]["metadata"][str(BLOCK_META_RESPONSE_ID)] == iid
    geppetto_sim.queue(Reply(text="The end."))
    again = httpx.post(f"{b.url}/api/sessions/{sid}/messages", json={"text": "And then?"}).json()
    assert _read(b.url, sid, again["after"])[-1]["data"]["status"] == "completed"
    assert geppetto_sim.requests[-1].body["previous_interaction_id"] == iid
