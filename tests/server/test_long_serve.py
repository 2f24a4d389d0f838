"""Long sessions behind ``geppetto serve``: a worker keeps the sessions it ran hot and reads only what another
worker wrote since; a 2,000-prompt session alternating between two workers on PostgreSQL keeps every snapshot
and every event."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import Worker, bus_url, running_app, sim_profile, sse_events, two_script_workers

from geppetto.server import create_app
from geppetto.session.stores import SQLTurnStore, open_store
from geppetto.simulator import Simulator


def query(target: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(target, autocommit=True) as conn:
        return list(conn.execute(sql.replace("?", "%s"), params).fetchall())


LONG_PROMPTS = int(os.environ.get("GEPPETTO_TEST_LONG_PROMPTS", "2000"))


def run_prompt(client: httpx.Client, session_id: str, text: str) -> list[dict[str, Any]]:
    started = client.post(f"/api/sessions/{session_id}/messages", json={"text": text})
    assert started.status_code == 202, started.text
    with client.stream(
        "GET",
        f"/api/sessions/{session_id}/events",
        params={"after": started.json()["after"], "until": "finished", "inference_id": started.json()["inference_id"]},
    ) as response:
        events = list(sse_events(response.iter_lines()))
    assert events[-1]["event"] == "run_finished" and events[-1]["data"]["status"] == "completed", events[-1]
    return events


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often every worker in this process read a session's snapshots."""
    calls = {"load_latest": 0, "load_session": 0}
    for name in calls:
        original = getattr(SQLTurnStore, name)

        async def wrapper(self: Any, *args: Any, _name: str = name, _original: Any = original) -> Any:
            calls[_name] += 1
            return await _original(self, *args)

        monkeypatch.setattr(SQLTurnStore, name, wrapper)
    return calls


def test_a_worker_keeps_its_session_hot_and_reads_what_another_wrote(
    geppetto_sim: Simulator, tmp_path: Path, counted: dict[str, int]
) -> None:
    path = str(tmp_path / "s.db")
    a_app = create_app(sim_profile(geppetto_sim), store=open_store(path))
    b_app = create_app(sim_profile(geppetto_sim), store=open_store(path))
    with (
        running_app(a_app) as a_url,
        running_app(b_app) as b_url,
        httpx.Client(base_url=a_url, timeout=30) as a,
        httpx.Client(base_url=b_url, timeout=30) as b,
    ):
        sid = a.post("/api/sessions", json={}).json()["id"]
        for text in ("one", "two", "three"):
            run_prompt(a, sid, text)
        assert counted == {"load_latest": 0, "load_session": 0}, "the worker that ran it kept it"
        run_prompt(b, sid, "four")  # the other worker has never seen it: one snapshot read
        assert counted == {"load_latest": 1, "load_session": 0}
        run_prompt(a, sid, "five")  # the store holds a newer snapshot than the hot one: read it again
        assert counted == {"load_latest": 2, "load_session": 0}
        run_prompt(a, sid, "six")
        assert counted["load_latest"] == 2
        latest = a.get(f"/api/sessions/{sid}").json()["latest"]
        prompts = [blk["payload"]["text"] for blk in latest["blocks"] if blk["kind"] == "user"]
        assert prompts == ["one", "two", "three", "four", "five", "six"]
        assert counted["load_session"] == 0


@pytest.fixture
def two_workers(postgres_target: str) -> Iterator[tuple[Worker, Worker]]:
    """Two server processes on one PostgreSQL store and one Redis bus, with an engine that answers at once
    (the subject is the server and the store; the simulator's own cost grows with the context)."""
    args = [str(Path(__file__).with_name("answering_worker.py")), postgres_target, bus_url("redis")]
    with two_script_workers(*args) as workers:
        yield workers


def test_a_long_session_alternating_between_two_workers_keeps_every_snapshot_and_event(
    two_workers: tuple[Worker, Worker], postgres_target: str
) -> None:
    a, b = two_workers
    with httpx.Client(base_url=a.url, timeout=60) as ca, httpx.Client(base_url=b.url, timeout=60) as cb:
        sid = ca.post("/api/sessions", json={}).json()["id"]
        answers = []
        for i in range(LONG_PROMPTS):
            events = run_prompt((ca, cb)[i % 2], sid, f"prompt {i}")
            text = "".join(
                e["data"].get("delta") or e["data"].get("text") or "" for e in events if e["event"] == "text_delta"
            )
            answers.append(text)
        session = cb.get(f"/api/sessions/{sid}").json()
    assert session["snapshot_count"] == LONG_PROMPTS and session["status"] == "idle"
    blocks = session["latest"]["blocks"]
    assert [blk["payload"]["text"] for blk in blocks if blk["kind"] == "user"] == [
        f"prompt {i}" for i in range(LONG_PROMPTS)
    ]
    assert [blk["payload"]["text"] for blk in blocks if blk["kind"] == "llm_text"] == answers
    assert answers == [f"You asked: prompt {i}" for i in range(LONG_PROMPTS)]
    # Every snapshot: its length, and its blocks are the latest's first ones (nothing was edited).
    lengths = query(postgres_target, "SELECT seq, length FROM snapshots WHERE session_id = ? ORDER BY seq", (sid,))
    per_prompt = len(blocks) // LONG_PROMPTS
    assert lengths == [(i, per_prompt * i) for i in range(1, LONG_PROMPTS + 1)]
    assert query(postgres_target, "SELECT count(*) FROM spans WHERE to_seq IS NOT NULL") == [(0,)]
    assert query(postgres_target, "SELECT count(*) FROM block_versions") == [(len(blocks),)]
    with httpx.Client(base_url=a.url, timeout=60) as ca:
        for seq in (1, LONG_PROMPTS // 2, LONG_PROMPTS):
            turn = ca.get(f"/api/sessions/{sid}/snapshots/{seq}").json()["turn"]
            assert turn["blocks"] == blocks[: per_prompt * seq]
    # Every event: one log per inference, each from its start to its final event, none twice.
    rows = query(
        postgres_target,
        "SELECT inference_id, count(*), sum(CASE WHEN type = 'final' THEN 1 ELSE 0 END), max(seq) + 1 "
        "FROM events WHERE session_id = ? GROUP BY inference_id",
        (sid,),
    )
    assert len(rows) == LONG_PROMPTS
    assert all(count == last and finals == 1 for _inference, count, finals, last in rows)
