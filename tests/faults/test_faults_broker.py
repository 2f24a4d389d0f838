"""The event bus and the server's publishing when the broker is idle, killed and restarted: brokers of the
tests' own (``brokers.py``), skipped with the reason when redis-server or nats-server is not installed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from brokers import Broker

from geppetto.events.bus import BusEvent, BusUnavailable, EventBus, open_bus


@pytest.fixture
def redis_broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker("redis", tmp_path / "redis")
    broker.folder.mkdir()
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


@pytest.fixture
def nats_broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker("nats", tmp_path / "nats")
    broker.folder.mkdir()
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


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
