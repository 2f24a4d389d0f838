"""The event bus and the server's publishing when the broker is idle, killed and restarted: brokers of the
tests' own (``brokers.py``), skipped with the reason when redis-server or nats-server is not installed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from brokers import Broker

from geppetto.events import EventFinal, EventStart, EventTextDelta, metadata_for, publish
from geppetto.events.bus import BusEvent, BusUnavailable, EventBus, open_bus
from geppetto.server._metrics import server_metrics
from geppetto.server._publish import EVENTS_MISSING
from geppetto.server._runner import Runner, Started
from geppetto.session.stores import open_store
from geppetto.testing import FunctionEngine
from geppetto.turns import Block, Turn

pytest.importorskip("starlette")


def _running(kind: str, tmp_path: Path) -> Iterator[Broker]:
    """A ``kind`` broker of the test's own, killed after it."""
    broker = Broker(kind, tmp_path / kind)
    broker.folder.mkdir()
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


@pytest.fixture
def redis_broker(tmp_path: Path) -> Iterator[Broker]:
    yield from _running("redis", tmp_path)


@pytest.fixture
def nats_broker(tmp_path: Path) -> Iterator[Broker]:
    yield from _running("nats", tmp_path)


@pytest.fixture
async def redis_bus(redis_broker: Broker) -> AsyncIterator[EventBus]:
    bus = open_bus(redis_broker.url)
    yield bus
    await bus.close()


async def next_event(reader: AsyncIterator[BusEvent], within: float) -> BusEvent:
    async with asyncio.timeout(within):
        return await anext(reader)


async def publish_when_back(bus: EventBus, topic: str, data: dict[str, object], within: float) -> str:
    """Publish, trying again while the broker is still away, for up to ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        try:
            return await bus.publish(topic, data)
        except BusUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


# -- an idle Redis subscription stays open ------------------------------------------------------------
async def test_an_idle_redis_subscription_outlives_the_old_five_second_limit(redis_bus: EventBus) -> None:
    # The reported case: redis-py's socket timeout (5 s) equal to the XREAD wait (5 s) ended every
    # subscription that saw no event for 5 s with "Timeout reading".
    reader = redis_bus.subscribe("idle")
    waiting = asyncio.create_task(next_event(reader, 20))
    await asyncio.sleep(6.5)
    assert not waiting.done(), "the subscription ended while idle"
    sent = await redis_bus.publish("idle", {"n": 1})
    assert await waiting == BusEvent(sent, {"n": 1})
    await reader.aclose()  # type: ignore[attr-defined]


async def test_the_redis_wait_stays_below_a_socket_timeout_set_in_the_url(redis_broker: Broker) -> None:
    # The class of the bug: whatever the socket timeout, one XREAD must wait less than it. With a 1 s
    # socket timeout a 5 s wait failed after 1 s; idle three times as long, the subscription still delivers.
    bus = open_bus(redis_broker.url + "?socket_timeout=1")
    try:
        reader = bus.subscribe("idle")
        waiting = asyncio.create_task(next_event(reader, 20))
        await asyncio.sleep(3)
        assert not waiting.done(), "the subscription ended while idle"
        sent = await bus.publish("idle", {"n": 1})
        assert await waiting == BusEvent(sent, {"n": 1})
        await reader.aclose()  # type: ignore[attr-defined]
    finally:
        await bus.close()


async def test_a_broker_that_is_down_is_unavailable_not_a_bad_setting(redis_broker: Broker) -> None:
    bus = open_bus(redis_broker.url)
    try:
        redis_broker.kill()
        with pytest.raises(BusUnavailable, match="check that Redis runs there") as caught:
            await bus.publish("t", {})
        assert not isinstance(caught.value, ValueError), "a broker outage is not a wrong request (409)"
    finally:
        await bus.close()


# -- NATS comes back ----------------------------------------------------------------------------------
async def test_nats_down_longer_than_the_old_reconnect_budget_recovers_without_a_restart(
    nats_broker: Broker,
) -> None:
    # The client gave up after 3 reconnect attempts 2 s apart and stayed closed (cached) for good.
    bus = open_bus(nats_broker.url)
    try:
        first = await bus.publish("t", {"n": 1})
        nats_broker.kill()
        await asyncio.sleep(9)
        with pytest.raises(BusUnavailable):
            await bus.publish("t", {"n": 2})
        nats_broker.start()
        second = await publish_when_back(bus, "t", {"n": 2}, within=20)
        assert int(second) > int(first)
        reader = bus.subscribe("t")
        assert [(await next_event(reader, 10)).data for _ in range(2)] == [{"n": 1}, {"n": 2}]
        await reader.aclose()  # type: ignore[attr-defined]
    finally:
        await bus.close()


# -- events published while the broker is down --------------------------------------------------------
def delta_engine(count: int, at: dict[int, Callable[[], None]]) -> FunctionEngine:
    """An engine that streams ``count`` text deltas ("0 ", "1 ", ...), calling ``at[i]`` before delta ``i``
    and then giving the worker's publishing a moment to run (and fail)."""

    async def stream(turn: Turn) -> Turn:
        meta = metadata_for(turn, "testing")
        publish(EventStart(meta))
        for i in range(count):
            if i in at:
                at[i]()
                await asyncio.sleep(1.0)
            publish(EventTextDelta(meta, f"{i} "))
            await asyncio.sleep(0)
        publish(EventFinal(meta, ""))
        turn.append(Block.llm_text(" ".join(str(i) for i in range(count))))
        return turn

    return FunctionEngine(stream)


async def run_to_the_end(runner: Runner, session_id: str, prompt: str) -> Started:
    await runner.store.create_session(session_id, {})
    started = await runner.start(session_id, prompt)
    async with asyncio.timeout(60):
        await runner._running[session_id].done.wait()
    return started


async def read_inference(bus: EventBus, session_id: str, started: Started, within: float) -> list[dict[str, Any]]:
    """The bus's events of ``started``'s inference, up to its ``run_finished``."""
    out: list[dict[str, Any]] = []
    reader = bus.subscribe(session_id, started.after)
    async with asyncio.timeout(within):
        async for event in reader:
            if event.data.get("inference_id") == started.inference_id:
                out.append(event.data)
                if event.data["type"] == "run_finished":
                    break
    await reader.aclose()  # type: ignore[attr-defined]
    return out


async def test_events_published_while_redis_is_down_reach_a_resuming_reader(
    redis_broker: Broker, tmp_path: Path
) -> None:
    # The reported case: Redis killed at delta 30 and back at delta 70; a reader resuming with its last id
    # missed the 40 deltas between and still got run_finished: completed.
    bus = open_bus(redis_broker.url)
    store = open_store(tmp_path / "store.db")
    engine = delta_engine(100, {30: redis_broker.kill, 70: redis_broker.start})
    runner = Runner(store, bus, lambda settings: engine)
    try:
        started = await run_to_the_end(runner, "s1", "count")
        events = await read_inference(bus, "s1", started, within=30)
    finally:
        await runner.close()
        await bus.close()
        store.close()
    deltas = [e["delta"] for e in events if e["type"] == "text_delta"]
    assert deltas == [f"{i} " for i in range(100)], "every delta, in order"
    assert [e["type"] for e in events if e["type"] != "text_delta"] == ["run_started", "start", "final", "run_finished"]
    assert events[-1]["status"] == "completed"
    assert server_metrics.snapshot().get("publish_failures:redis", 0) >= 1


async def test_a_full_outbox_tells_the_reader_what_is_missing_and_where_to_read_it(
    redis_broker: Broker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bus = open_bus(redis_broker.url)
    store = open_store(tmp_path / "store.db")
    engine = delta_engine(100, {30: redis_broker.kill, 70: redis_broker.start})
    runner = Runner(store, bus, lambda settings: engine)
    runner.publisher.limit = 20
    dropped = server_metrics.snapshot().get("events_dropped:outbox_full", 0)
    try:
        started = await run_to_the_end(runner, "s1", "count")
        events = await read_inference(bus, "s1", started, within=30)
    finally:
        await runner.close()
        await bus.close()
        store.close()
    types = [e["type"] for e in events]
    missing = [e for e in events if e["type"] == EVENTS_MISSING]
    assert len(missing) == 1, types
    notice = missing[0]
    assert notice["inference_id"] == started.inference_id and notice["log"] == "/api/sessions/s1/inspect"
    deltas = [int(e["delta"]) for e in events if e["type"] == "text_delta"]
    # the gap is where the notice stands, and the notice counts exactly what is not there
    before = [int(e["delta"]) for e in events[: types.index(EVENTS_MISSING)] if e["type"] == "text_delta"]
    after = deltas[len(before) :]
    assert before == list(range(len(before))) and after == list(range(100 - len(after), 100))
    assert notice["count"] == (100 - len(deltas)) + (0 if "final" in types else 1) > 1
    assert types[0] == "run_started" and events[-1]["type"] == "run_finished" and events[-1]["status"] == "completed"
    assert server_metrics.snapshot()["events_dropped:outbox_full"] - dropped == notice["count"]
    assert any(r.levelname == "ERROR" and "outbox of session s1 is full" in r.getMessage() for r in caplog.records)
    # what the notice points at holds the whole inference
    recorded = await open_store(tmp_path / "store.db").load_events("s1", started.inference_id)
    assert sum(1 for e in recorded if e.type == "text_delta") == 100


async def test_a_cancel_from_another_worker_arrives_after_nats_was_down(nats_broker: Broker, tmp_path: Path) -> None:
    # Down longer than the old reconnect budget (3 attempts 2 s apart), after which the control topic of
    # every worker stayed dead until a restart.
    store = open_store(tmp_path / "store.db")
    here, there = open_bus(nats_broker.url), open_bus(nats_broker.url)
    never = asyncio.Event()

    async def hang(turn: Turn) -> Turn:
        await never.wait()
        return turn

    engine = FunctionEngine(hang)
    running, other = Runner(store, here, lambda s: engine), Runner(store, there, lambda s: engine)
    try:
        await running.start_listening()
        await store.create_session("s1", {})
        started = await running.start("s1", "wait")
        nats_broker.kill()
        await asyncio.sleep(9)
        nats_broker.start()
        deadline = time.monotonic() + 20
        while True:  # the other worker's cancel fails (503) until its own client is back
            try:
                assert await other.cancel("s1") == started.inference_id
                break
            except BusUnavailable:
                assert time.monotonic() < deadline, "the other worker never reached NATS again"
                await asyncio.sleep(0.5)
        async with asyncio.timeout(20):
            await running._running["s1"].done.wait()
        [record] = await store.inferences("s1")
        assert record.status == "cancelled"
    finally:
        never.set()
        await running.close()
        await other.close()
        await here.close()
        await there.close()
        store.close()


def test_an_idle_event_stream_on_redis_stays_open_with_keep_alive_comments(
    redis_broker: Broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reported case over HTTP: an idle /events ended after 5 s with "error: Timeout reading".
    import httpx

    from geppetto._asgi import ThreadedServer
    from geppetto.server import _app, create_app

    monkeypatch.setattr(_app, "KEEPALIVE_SECONDS", 1.0)
    engine = FunctionEngine(lambda turn: turn.append(Block.llm_text("hi")) and None)
    app = create_app(store=str(tmp_path / "store.db"), bus=redis_broker.url, engine_for=lambda s: engine)
    server = ThreadedServer(app, lifespan="on", name="geppetto-idle-stream")
    server.start()
    try:
        sid = httpx.post(server.url + "/api/sessions", json={}).json()["id"]
        lines: list[str] = []
        with httpx.stream("GET", f"{server.url}/api/sessions/{sid}/events", timeout=30) as response:
            began, posted = time.monotonic(), None
            for line in response.iter_lines():
                lines.append(line)
                if line.startswith("event: "):
                    break
                if posted is None and time.monotonic() - began > 7.5:  # idle longer than the old limit
                    posted = httpx.post(f"{server.url}/api/sessions/{sid}/messages", json={"text": "Hello"})
                    assert posted.status_code == 202
        assert lines[-1] == "event: run_started", lines
        assert lines.count(": keep-alive") >= 6
    finally:
        server.stop()
