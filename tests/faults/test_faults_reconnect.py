"""``geppetto serve`` across a restart of its broker or database while idle, and while one is down: brokers
and a PostgreSQL server of the tests' own (``brokers.py``, ``pginstance.py``), never the shared ones.

A pooled connection from before the restart fails over to a fresh one once, so the next request succeeds;
an outage is a 503 within a few seconds; a read that needs only the store works while the bus is down."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from brokers import Broker
from pginstance import PostgresInstance

from geppetto._asgi import ThreadedServer
from geppetto.server import create_app
from geppetto.testing import FunctionEngine
from geppetto.turns import Block, Turn

pytest.importorskip("fastapi")

QUICK = 6.0
"""Seconds an answer during an outage may take at most (the documented bounds are 2-3 s)."""


def _answer(turn: Turn) -> Turn:
    turn.blocks.append(Block.llm_text("ok"))
    return turn


@contextlib.contextmanager
def served(store: str, bus: str | None = None) -> Iterator[httpx.Client]:
    app = create_app(store=store, bus=bus, engine_for=lambda settings: FunctionEngine(_answer), sweep_interval=0)
    server = ThreadedServer(app, lifespan="on", name="geppetto-reconnect-test")
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            yield client
    finally:
        server.stop()


def prompt(client: httpx.Client, sid: str) -> dict[str, Any]:
    """Send a prompt and read its events to ``run_finished``; that event's data."""
    started = client.post(f"/api/sessions/{sid}/messages", json={"text": "hello"})
    assert started.status_code == 202, started.text
    body = started.json()
    params = {"after": body["after"], "until": "finished", "inference_id": body["inference_id"]}
    with client.stream("GET", f"/api/sessions/{sid}/events", params=params) as events:
        assert events.status_code == 200
        data = [json.loads(line[5:]) for line in events.iter_lines() if line.startswith("data:")]
    assert data and data[-1]["type"] == "run_finished", data
    return dict(data[-1])


def timed(send: Any) -> tuple[httpx.Response, float]:
    began = time.monotonic()
    answer = send()
    return answer, time.monotonic() - began


# -- the event bus ---------------------------------------------------------------------------------------
@pytest.fixture(params=["redis", "nats"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(request.param, tmp_path / request.param)
    broker.folder.mkdir()
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


def test_a_broker_restarted_while_idle_is_not_noticed_by_the_next_request(broker: Broker, tmp_path: Path) -> None:
    with served(str(tmp_path / "s.db"), broker.url) as client:
        sid = client.post("/api/sessions", json={}).json()["id"]
        assert prompt(client, sid)["status"] == "completed"
        broker.kill()
        broker.start()
        # The worker's pooled connections are to the old process: the first request after the restart
        # gets a fresh one instead of bus_unavailable.
        view = client.get(f"/api/sessions/{sid}")
        assert view.status_code == 200 and view.json()["last_event_id"] is not None, view.text
        assert prompt(client, sid)["status"] == "completed"


def test_while_the_bus_is_down_reads_of_the_store_work_and_prompts_are_503_quickly(
    broker: Broker, tmp_path: Path
) -> None:
    with served(str(tmp_path / "s.db"), broker.url) as client:
        sid = client.post("/api/sessions", json={}).json()["id"]
        assert prompt(client, sid)["status"] == "completed"
        broker.kill()
        view, took = timed(lambda: client.get(f"/api/sessions/{sid}"))
        assert view.status_code == 200, view.text
        assert view.json()["last_event_id"] is None and len(view.json()["snapshots"]) == 1
        assert took < QUICK
        refused, took = timed(lambda: client.post(f"/api/sessions/{sid}/messages", json={"text": "again"}))
        assert refused.status_code == 503 and refused.json()["error"]["type"] == "unavailable", refused.text
        assert took < QUICK, f"the 503 took {took:.1f} s"
        broker.start()
        assert prompt(client, sid)["status"] == "completed"


# -- PostgreSQL ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresInstance]:
    instance = PostgresInstance()
    instance.start()
    try:
        yield instance
    finally:
        instance.close()


@pytest.fixture
def pg_url(pg: PostgresInstance) -> Iterator[str]:
    if not (pg.data / "postmaster.pid").exists():
        pg.start()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield f"{pg.url}?options=-csearch_path%3D{schema}"
    if not (pg.data / "postmaster.pid").exists():
        pg.start()
    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgres_restarted_while_idle_is_not_noticed_by_the_next_request(
    pg: PostgresInstance, pg_url: str, mode: str
) -> None:
    with served(pg_url) as client:
        sids = [client.post("/api/sessions", json={}).json()["id"] for _ in range(2)]
        for sid in sids:
            assert prompt(client, sid)["status"] == "completed"
        # "fast" is what an administrator's restart does: each connection is told "terminating connection
        # due to administrator command" (the lock connection and the pooled ones alike).
        pg.stop(mode)
        pg.start()
        assert prompt(client, sids[0])["status"] == "completed"
        view = client.get(f"/api/sessions/{sids[1]}")
        assert view.status_code == 200 and len(view.json()["snapshots"]) == 1, view.text
        assert prompt(client, sids[1])["status"] == "completed"


def test_during_a_postgres_outage_each_request_is_503_quickly(pg: PostgresInstance, pg_url: str) -> None:
    with served(pg_url) as client:
        sid = client.post("/api/sessions", json={}).json()["id"]
        assert prompt(client, sid)["status"] == "completed"
        pg.stop()
        try:
            for send in (
                lambda: client.get(f"/api/sessions/{sid}"),
                lambda: client.post(f"/api/sessions/{sid}/messages", json={"text": "again"}),
                lambda: client.get("/api/sessions"),
            ):
                answer, took = timed(send)
                assert answer.status_code == 503, answer.text
                assert "check the server is up" in answer.json()["error"]["message"]
                assert took < QUICK, f"{answer.request.method} {answer.request.url.path}: 503 after {took:.1f} s"
        finally:
            pg.start()
        assert prompt(client, sid)["status"] == "completed"
