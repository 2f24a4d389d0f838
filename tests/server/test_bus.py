"""Every event bus: ordered ids, replay after a cursor, live delivery, retention, bad cursors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from server_support import bus_url

from geppetto import ConfigurationError
from geppetto.events.bus import START, BusEvent, BusUnavailable, EventBus, MemoryBus, open_bus


async def take(events: AsyncIterator[BusEvent], n: int) -> list[BusEvent]:
    out: list[BusEvent] = []
    async with asyncio.timeout(10):
        async for event in events:
            out.append(event)
            if len(out) == n:
                break
    return out


async def test_replay_then_live_in_order(bus: EventBus, topic: str) -> None:
    assert await bus.last_id(topic) == START
    first = [await bus.publish(topic, {"n": i}) for i in range(3)]
    assert await bus.last_id(topic) == first[-1]
    reader = bus.subscribe(topic)
    got = await take(reader, 3)
    assert [e.data for e in got] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert [e.id for e in got] == first

    async def later() -> list[str]:
        await asyncio.sleep(0.05)
        return [await bus.publish(topic, {"n": i}) for i in range(3, 6)]

    publisher = asyncio.create_task(later())
    live = await take(reader, 3)
    assert [e.data["n"] for e in live] == [3, 4, 5]
    assert [e.id for e in live] == await publisher
    await reader.aclose()  # type: ignore[attr-defined]


async def test_resume_after_a_cursor_loses_and_repeats_nothing(bus: EventBus, topic: str) -> None:
    ids = [await bus.publish(topic, {"n": i}) for i in range(10)]
    got = await take(bus.subscribe(topic, ids[3]), 6)
    assert [e.data["n"] for e in got] == [4, 5, 6, 7, 8, 9]


async def test_a_publish_retried_with_its_key_is_appended_once(bus: EventBus, topic: str) -> None:
    first = await bus.publish(topic, {"n": 1}, key=topic + "-1")
    assert await bus.publish(topic, {"n": 1}, key=topic + "-1") == first, "the retry answers with the first id"
    second = await bus.publish(topic, {"n": 2}, key=topic + "-2")
    unkeyed = [await bus.publish(topic, {"n": 3}), await bus.publish(topic, {"n": 3})]
    got = await take(bus.subscribe(topic), 4)
    assert [e.data["n"] for e in got] == [1, 2, 3, 3]
    assert [e.id for e in got] == [first, second, *unkeyed]


async def test_topics_are_separate(bus: EventBus, topic: str) -> None:
    await bus.publish(topic + "-a", {"to": "a"})
    await bus.publish(topic + "-b", {"to": "b"})
    assert [e.data for e in await take(bus.subscribe(topic + "-b"), 1)] == [{"to": "b"}]


async def test_a_cursor_the_bus_did_not_give_is_refused(bus: EventBus, topic: str) -> None:
    with pytest.raises(ValueError, match="reconnect without an id"):
        await take(bus.subscribe(topic, "not-an-id"), 1)


async def test_two_connections_share_one_log() -> None:
    for kind in ("redis", "nats"):
        try:
            url = bus_url(kind)
        except pytest.skip.Exception:
            continue
        a, b = open_bus(url), open_bus(url)
        topic = f"shared-{kind}-{id(a)}"
        try:
            reader = b.subscribe(topic)
            sent = await a.publish(topic, {"from": "a"})
            got = await take(reader, 1)
            assert got == [BusEvent(sent, {"from": "a"})]
        finally:
            await a.close()
            await b.close()


async def test_memory_retention_drops_the_oldest() -> None:
    bus = MemoryBus(retention=3)
    for i in range(5):
        await bus.publish("t", {"n": i})
    assert [e.data["n"] for e in await take(bus.subscribe("t"), 3)] == [2, 3, 4]


def test_unknown_bus_url_names_the_choices() -> None:
    with pytest.raises(ConfigurationError, match="memory://, redis://"):
        open_bus("kafka://x")


async def test_unreachable_broker_names_itself() -> None:
    bus = open_bus("redis://127.0.0.1:1/0")
    with pytest.raises(BusUnavailable, match="check that Redis runs there"):
        await bus.publish("t", {})
    await bus.close()
