"""``geppetto serve`` with two worker processes on one PostgreSQL store and one Redis bus and an engine that
streams its answers (not background): the worker running an inference is killed (SIGKILL) after the
provider answered ``response.created`` and before the answer was read; the other worker reads the response
back by its id, and the simulator gets one ``POST /responses`` for the step."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import Worker, bus_url, sse_events, two_script_workers

from geppetto.session.stores import open_store
from geppetto.session.stores._background import background_response
from geppetto.simulator import Reply, Simulator
from geppetto.turns import BLOCK_META_RESPONSE_ID

SCRIPT = str(Path(__file__).with_name("journal_worker.py"))
ANSWER = "It is sunny in Paris today."


@pytest.fixture
def two_workers(postgres_target: str, geppetto_sim: Simulator, tmp_path: Path) -> Iterator[tuple[Worker, Worker]]:
    hold = tmp_path / "hold"
    hold.touch()  # no request waits
    args = [SCRIPT, postgres_target, bus_url("redis"), geppetto_sim.openai_url, str(tmp_path / "runs"), str(hold)]
    with two_script_workers(*args, "plain") as workers:
        yield workers


def _recorded(target: str, sid: str, inference_id: str) -> str:
    """The response id the running worker recorded for ``inference_id`` (waited for)."""

    async def wait() -> str:
        store = open_store(target)
        try:
            found = None
            async with asyncio.timeout(20):
                while found is None:
                    await asyncio.sleep(0.02)
                    found = await background_response(store, sid, inference_id)
            return found.response_id
        finally:
            store.close()

    return asyncio.run(wait())


def _events(url: str, sid: str, last_id: str) -> list[dict[str, Any]]:
    with httpx.stream(
        "GET",
        f"{url}/api/sessions/{sid}/events",
        params={"until": "finished"},
        headers={"Last-Event-ID": last_id},
        timeout=60,
    ) as response:
        assert response.status_code == 200
        return list(sse_events(response.iter_lines()))


def test_a_worker_killed_after_response_created_leaves_the_step_read_back(
    two_workers: tuple[Worker, Worker], geppetto_sim: Simulator, postgres_target: str
) -> None:
    a, b = two_workers
    geppetto_sim.queue(Reply(text=ANSWER))
    geppetto_sim.fail_next(stall_after=1, stall_seconds=1.0, finish_after_cut=True)  # generating, server-side
    sid = httpx.post(f"{b.url}/api/sessions", json={}).json()["id"]
    started = httpx.post(f"{a.url}/api/sessions/{sid}/messages", json={"text": "Weather in Paris?"}).json()
    rid = _recorded(postgres_target, sid, started["inference_id"])
    a.kill()
    events = _events(b.url, sid, started["after"])
    finished = events[-1]
    assert (finished["event"], finished["data"]["status"]) == ("run_finished", "completed")
    assert finished["data"]["inference_id"] == started["inference_id"]
    kinds = [e["event"] for e in events]
    assert kinds.count("start") == 1 and kinds.count("final") == 1, "each event once"
    posts = [r for r in geppetto_sim.requests if r.method == "POST" and r.path == "/v1/responses"]
    assert len(posts) == 1, "no second POST /responses for the step: the answer was read back"
    assert f"/v1/responses/{rid}" in [r.path for r in geppetto_sim.requests if r.method == "GET"]
    deadline = time.monotonic() + 10
    while httpx.get(f"{b.url}/api/sessions/{sid}").json()["status"] != "idle" and time.monotonic() < deadline:
        time.sleep(0.05)
    session = httpx.get(f"{b.url}/api/sessions/{sid}").json()
    blocks = session["latest"]["blocks"]
    assert [blk["payload"].get("text") for blk in blocks] == ["Weather in Paris?", ANSWER]
    assert blocks[-1]["metadata"][str(BLOCK_META_RESPONSE_ID)] == rid
    assert [i["status"] for i in session["inferences"]] == ["completed"]
