"""Fault-matrix cells on a PostgreSQL server of the tests' own (see ``pginstance.py``), stopped and restarted
while a server worker (``Runner``) runs an inference held at a gate: the answer survives a restart and is
saved once, every run ends with ``run_finished``, a stale ``running`` inference is swept, and a worker
whose lock connection dropped takes its leases again or stops the inferences it lost."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from pginstance import PostgresInstance

from geppetto import StoreError
from geppetto.events.bus import MemoryBus
from geppetto.server import RUN_FINISHED, Runner
from geppetto.session.stores import PostgresTurnStore
from geppetto.session.stores._sql import lock_key
from geppetto.testing import ScriptedEngine
from geppetto.turns import Block, Turn

ANSWER = "the answer, kept"
DEADLINE = 60.0  # seconds any wait below may take before the test fails instead of hanging


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
    """A fresh schema on the test's own server (started again if a test left it stopped)."""
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


class GatedEngine:
    """Answers ``ANSWER`` once ``gate`` is set; ``entered`` is set when the inference has begun."""

    def __init__(self) -> None:
        self.inner = ScriptedEngine([Block.llm_text(ANSWER)])
        self.entered = asyncio.Event()
        self.gate = asyncio.Event()

    async def run_inference(self, turn: Turn) -> Turn:
        self.entered.set()
        await self.gate.wait()
        return await self.inner.run_inference(turn)


@pytest.fixture
async def worker(pg_url: str) -> AsyncIterator[tuple[Runner, GatedEngine]]:
    engine = GatedEngine()
    store = PostgresTurnStore(pg_url, reconnect_for=30.0)
    runner = Runner(store, MemoryBus(), lambda settings: engine, sweep_interval=0)  # sweeps by hand
    await store.create_session("s1", {})
    try:
        yield runner, engine
    finally:
        engine.gate.set()
        await runner.close(grace=DEADLINE)
        store.close()


async def run_finished(runner: Runner, session_id: str, after: str) -> dict[str, Any]:
    async def first() -> dict[str, Any]:
        async for event in runner.bus.subscribe(session_id, after):
            if event.data.get("type") == RUN_FINISHED:
                return event.data
        raise AssertionError("the bus ended before run_finished")

    return await asyncio.wait_for(first(), DEADLINE)


def other_worker_takes(url: str, session_id: str) -> psycopg.Connection[Any]:
    """A connection holding ``session_id``'s lease as another worker would (closed by the caller)."""
    conn = psycopg.connect(url, autocommit=True)
    assert conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_key(session_id),)).fetchone() == (True,)
    return conn


def lease_is_free(url: str, session_id: str) -> bool:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_key(session_id),)).fetchone()
        return row == (True,)


async def test_a_restart_mid_inference_keeps_the_answer_saved_once_and_ends_the_run(
    pg: PostgresInstance, worker: tuple[Runner, GatedEngine]
) -> None:
    runner, engine = worker
    started = await runner.start("s1", "Hello")
    await asyncio.wait_for(engine.entered.wait(), DEADLINE)
    await asyncio.to_thread(pg.restart)  # every pooled connection and the lock connection die
    engine.gate.set()
    finished = await run_finished(runner, "s1", started.after)
    assert (finished["status"], finished.get("error")) == ("completed", None)
    snapshots = await runner.store.load_session("s1")
    assert len(snapshots) == 1 and snapshots[0].blocks[-1].text == ANSWER
    [record] = await runner.store.inferences("s1")
    assert record.status == "completed"


async def test_the_worker_takes_its_lease_again_after_a_restart(
    pg: PostgresInstance, pg_url: str, worker: tuple[Runner, GatedEngine]
) -> None:
    runner, engine = worker
    started = await runner.start("s1", "Hello")
    await asyncio.wait_for(engine.entered.wait(), DEADLINE)
    await asyncio.to_thread(pg.restart)
    await runner.sweep()
    assert not lease_is_free(pg_url, "s1"), "the lease is held again, so no other worker starts the session"
    engine.gate.set()
    assert (await run_finished(runner, "s1", started.after))["status"] == "completed"


async def test_a_database_down_at_the_save_ends_the_run_failed_saying_where_the_answer_is(
    pg: PostgresInstance, pg_url: str
) -> None:
    engine = GatedEngine()
    store = PostgresTurnStore(pg_url, reconnect_for=0.5, connect_timeout=1.0)
    runner = Runner(store, MemoryBus(), lambda settings: engine, sweep_interval=0)
    try:
        await store.create_session("s1", {})
        started = await runner.start("s1", "Hello")
        await asyncio.wait_for(engine.entered.wait(), DEADLINE)
        await asyncio.to_thread(pg.stop)
        engine.gate.set()
        finished = await run_finished(runner, "s1", started.after)
        assert finished["status"] == "failed"
        assert finished["error"].startswith("the answer could not be saved: PostgreSQL session store")
        assert finished["error"].endswith(
            f"the worker's log holds it (inference {started.inference_id}), and so does the turn field"
        )
        assert finished["turn"]["blocks"][-1]["payload"]["text"] == ANSWER
        await asyncio.to_thread(pg.start)
        # The pool reconnects on its own schedule (backing off while the server was down): the sweep, which a
        # server runs every few seconds, records the end once it gets a connection again.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE
        while True:
            try:
                await runner.sweep()  # records the end the store refused while it was down, with its true reason
                break
            except StoreError:
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.2)
        [record] = await store.inferences("s1")
        assert record.status == "failed" and record.error is not None
        assert "could not be saved" in record.error
    finally:
        engine.gate.set()
        await runner.close(grace=DEADLINE)
        store.close()


async def test_a_commit_whose_answer_was_lost_is_not_done_twice(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = PostgresTurnStore(pg_url, reconnect_for=10.0)
    try:
        await store.create_session("s1", {})
        commit = psycopg.Transaction.__exit__
        lost: list[bool] = []

        def commit_then_lose_the_answer(self: psycopg.Transaction, *exc: Any) -> Any:
            out = commit(self, *exc)
            if exc[0] is None and not lost:
                lost.append(True)
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            return out

        monkeypatch.setattr(psycopg.Transaction, "__exit__", commit_then_lose_the_answer)
        turn = Turn()
        turn.append(Block.user("Hello"))
        await store.save_snapshot("s1", turn)
        assert lost == [True]
        assert len(await store.snapshot_infos("s1")) == 1
    finally:
        store.close()


async def test_only_a_lost_connection_is_tried_again_never_a_failed_statement(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = PostgresTurnStore(pg_url, reconnect_for=10.0)
    try:
        await store.create_session("s1", {})
        await store.begin_inference("s1", "i1", worker="w", prompt="p")
        opened = 0
        connection = store._connection

        def counting() -> Any:
            nonlocal opened
            opened += 1
            return connection()

        monkeypatch.setattr(store, "_connection", counting)
        with pytest.raises(StoreError, match="duplicate key"):
            await store.begin_inference("s1", "i1", worker="w", prompt="p")
        assert opened == 1, "a constraint error is the answer, not a reason to try again"

        drops = ["server closed the connection unexpectedly"]

        def flaky(conn: Any) -> int:
            if drops:
                raise psycopg.OperationalError(drops.pop())
            return 7

        opened = 0
        assert await store._run(flaky) == 7 and opened == 2
    finally:
        store.close()


async def test_the_sweeper_settles_a_run_whose_worker_is_gone_without_a_next_prompt(
    pg_url: str, worker: tuple[Runner, GatedEngine]
) -> None:
    runner, _ = worker
    store = runner.store
    await store.create_session("s2", {})
    await store.begin_inference("s1", "dead", worker="gone:1", prompt="hi")  # nobody holds s1
    await store.begin_inference("s2", "alive", worker="elsewhere:2", prompt="hi")
    holder = other_worker_takes(pg_url, "s2")  # a live worker runs s2
    try:
        after = await runner.bus.last_id("s1")
        await runner.sweep()
        assert (await store.inferences("s1"))[0].status == "running", "one sighting could be a restart's moment"
        await runner.sweep()
        [dead] = await store.inferences("s1")
        assert dead.status == "failed" and dead.error == "the worker running it (gone:1) stopped before it ended"
        finished = await run_finished(runner, "s1", after)
        assert (finished["inference_id"], finished["status"]) == ("dead", "failed")
        assert (await store.inferences("s2"))[0].status == "running"
    finally:
        holder.close()


async def test_the_sweeper_runs_by_itself_from_start_listening_to_close(pg_url: str) -> None:
    store = PostgresTurnStore(pg_url)
    runner = Runner(store, MemoryBus(), lambda settings: ScriptedEngine(), sweep_interval=0.01)
    try:
        await store.create_session("s1", {})
        await store.begin_inference("s1", "dead", worker="gone:1", prompt="hi")
        await runner.start_listening()
        finished = await run_finished(runner, "s1", "0")
        assert finished["inference_id"] == "dead"
    finally:
        await runner.close()
        store.close()
    assert runner._sweeper is not None and runner._sweeper.done()


async def test_a_dropped_lock_connection_whose_session_another_worker_took_stops_the_run(
    pg: PostgresInstance, pg_url: str, worker: tuple[Runner, GatedEngine]
) -> None:
    runner, engine = worker
    started = await runner.start("s1", "Hello")
    await asyncio.wait_for(engine.entered.wait(), DEADLINE)
    assert isinstance(runner.store, PostgresTurnStore)
    with psycopg.connect(pg.url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (runner.store._lock_conn.info.backend_pid,))
    holder = other_worker_takes(pg_url, "s1")
    try:
        await runner.sweep()
        finished = await run_finished(runner, "s1", started.after)
        assert finished["status"] == "cancelled"
        assert "lost the session's lease" in finished["error"]
        assert not engine.gate.is_set() and await runner.store.load_session("s1") == []
    finally:
        holder.close()


async def test_a_dropped_lock_connection_nobody_took_is_taken_again_and_the_run_goes_on(
    pg: PostgresInstance, pg_url: str, worker: tuple[Runner, GatedEngine]
) -> None:
    runner, engine = worker
    started = await runner.start("s1", "Hello")
    await asyncio.wait_for(engine.entered.wait(), DEADLINE)
    assert isinstance(runner.store, PostgresTurnStore)
    with psycopg.connect(pg.url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (runner.store._lock_conn.info.backend_pid,))
    await runner.sweep()
    assert not lease_is_free(pg_url, "s1")
    engine.gate.set()
    assert (await run_finished(runner, "s1", started.after))["status"] == "completed"
