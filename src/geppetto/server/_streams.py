"""Bus subscriptions as the event streams of the server's routes, with keep-alives while nothing comes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from ..events.bus import BusEvent, EventBus

__all__ = ["Streams"]


class Streams:
    """Bus subscriptions read through a queue, so a keep-alive comment can be sent while no event comes
    (the subscription is never cancelled mid-read) and a client that leaves stops its reader."""

    def __init__(self, bus: EventBus, keepalive: float) -> None:
        self.bus, self.keepalive = bus, keepalive

    async def events(self, topic: str, after: str) -> AsyncIterator[BusEvent | None]:
        """The events after ``after``; None every ``keepalive`` seconds without one."""
        queue: asyncio.Queue[BusEvent | BaseException] = asyncio.Queue(maxsize=1024)

        async def read() -> None:
            try:
                async for event in self.bus.subscribe(topic, after):
                    await queue.put(event)
            except Exception as exc:
                await queue.put(exc)

        reader = asyncio.get_running_loop().create_task(read())
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), self.keepalive)
                except TimeoutError:
                    yield None
                    continue
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
