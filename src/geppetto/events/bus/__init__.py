"""Event buses: how the events of an inference reach readers in other processes.

A bus keeps, per topic (a session id), an ordered and bounded log of JSON events. ``publish`` appends one
and returns its id; ``subscribe(topic, after)`` yields every retained event after the id ``after`` (``"0"``:
from the start of what is retained), then new ones as they are published, so a reader that reconnects with
the last id it saw loses and repeats nothing. Ids are opaque strings that increase within a topic. A
publish given a ``key`` can be retried after an error without appending the event twice.

``open_bus(url)``: ``None`` or ``memory://`` (one process), ``redis://`` (Redis Streams, extra ``redis``),
``nats://`` (NATS JetStream, extra ``nats``).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ..._exceptions import ConfigurationError, GeppettoError
from ..._extras import install_hint
from ..._redact import redact_url

__all__ = ["DEFAULT_RETENTION", "START", "BusEvent", "BusUnavailable", "EventBus", "MemoryBus", "open_bus"]

START = "0"
"""The cursor before the first event of every topic."""

DEFAULT_RETENTION = 10_000
"""Events kept per topic (older ones are dropped first)."""

DEFAULT_TTL = 24 * 3600
"""Seconds a broker keeps a topic's events after its last publish."""


class BusUnavailable(GeppettoError):
    """The broker could not be reached or failed (down, restarting, unreachable): a passing condition, not a
    wrong setting. The message names the broker and what to check."""


class BusEvent(NamedTuple):
    id: str
    data: dict[str, Any]


@runtime_checkable
class EventBus(Protocol):
    """An ordered, bounded, replayable event log per topic, shared by the processes that open the same URL."""

    url: str

    async def publish(self, topic: str, data: dict[str, Any], *, key: str | None = None) -> str:
        """Append ``data`` (JSON-able) to ``topic``'s log; returns its id.

        ``key``, an id unique to this event, makes a retry safe: when ``topic``'s newest event was published
        with the same key (a publish that reached the broker although its answer was lost), it is not
        appended again and its id is returned."""
        ...

    async def last_id(self, topic: str) -> str:
        """The id of ``topic``'s newest event (:data:`START` when it has none)."""
        ...

    def subscribe(self, topic: str, after: str = START) -> AsyncIterator[BusEvent]:
        """Every retained event of ``topic`` after ``after``, then each new one, until the consumer stops."""
        ...

    async def close(self) -> None: ...


class MemoryBus:
    """The in-process bus: readers in this process only (one worker). Keeps the last ``retention`` events
    of each topic."""

    def __init__(self, retention: int = DEFAULT_RETENTION) -> None:
        self.url = "memory://"
        self.retention = retention
        self._logs: dict[str, deque[tuple[int, dict[str, Any]]]] = {}
        self._next: dict[str, int] = {}
        self._keys: dict[str, str | None] = {}  # the key of each topic's newest event
        self._changed: dict[str, asyncio.Event] = {}

    async def publish(self, topic: str, data: dict[str, Any], *, key: str | None = None) -> str:
        if key is not None and self._keys.get(topic) == key:
            return str(self._next[topic])
        self._keys[topic] = key
        number = self._next.get(topic, 0) + 1
        self._next[topic] = number
        log = self._logs.get(topic)
        if log is None:
            log = self._logs[topic] = deque(maxlen=self.retention)
        log.append((number, data))
        changed = self._changed.pop(topic, None)
        if changed is not None:
            changed.set()
        return str(number)

    async def last_id(self, topic: str) -> str:
        return str(self._next.get(topic, 0))

    async def subscribe(self, topic: str, after: str = START) -> AsyncIterator[BusEvent]:
        position = _integer_cursor(after)
        while True:
            log = self._logs.get(topic, ())
            newest = log[-1][0] if log else 0
            if newest <= position:
                changed = self._changed.get(topic)
                if changed is None:
                    changed = self._changed[topic] = asyncio.Event()
                await changed.wait()
                continue
            # Numbers run without gaps, so the unseen events are the last ``newest - position`` of the log
            # (all of it when the reader fell behind the retention): read from the end, not the whole log.
            unseen = min(newest - position, len(log))
            for number, data in [log[i] for i in range(len(log) - unseen, len(log))]:
                position = number
                yield BusEvent(str(number), data)

    async def close(self) -> None:
        self._logs.clear()
        self._keys.clear()


def _integer_cursor(after: str) -> int:
    try:
        value = int(after)
    except (TypeError, ValueError):
        raise ValueError(f"event id {after!r} is not one this bus gave out; reconnect without an id") from None
    if value < 0:
        raise ValueError(f"event id {after!r} is not one this bus gave out; reconnect without an id")
    return value


def open_bus(url: str | None = None, *, retention: int = DEFAULT_RETENTION, ttl: float = DEFAULT_TTL) -> EventBus:
    """The bus for ``url``: ``None``/``memory://``, ``redis://host:6379/0`` or ``nats://host:4222``.

    Nothing connects until first use. A missing client library is a :class:`~geppetto.ConfigurationError`
    naming the extra to install; a broker that cannot be reached or fails is :class:`BusUnavailable`."""
    if url is None or url in ("memory", "memory://"):
        return MemoryBus(retention)
    if url.startswith(("redis://", "rediss://", "unix://")):
        try:
            from ._redis import RedisBus
        except ImportError:
            raise ConfigurationError(f"the Redis event bus needs the redis package: {install_hint('redis')}") from None
        return RedisBus(url, retention=retention, ttl=ttl)
    if url.startswith(("nats://", "tls://")):
        try:
            from ._nats import NatsBus
        except ImportError:
            raise ConfigurationError(f"the NATS event bus needs nats-py: {install_hint('nats')}") from None
        return NatsBus(url, retention=retention, ttl=ttl)
    raise ConfigurationError(
        f"unknown event bus {redact_url(url)!r}; use memory://, redis://HOST:6379/0 or nats://HOST:4222"
    )
