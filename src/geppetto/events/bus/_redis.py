"""The Redis Streams event bus: one stream per topic (``geppetto:events:<topic>``), trimmed to the retention
and expiring ``ttl`` seconds after its last event; ids are the stream's own entry ids.

A subscription waits for new events in ``XREAD BLOCK``, ``block`` seconds at a time. The connection's socket
timeout is always longer than that wait (``block`` + 10 s unless the URL sets ``socket_timeout``, and then
the wait is cut to half of it): a read that times out while Redis is still blocking is an error, and with
redis-py's default (5 s, the old wait) every idle subscription ended in "Timeout reading".

A publish with a ``key`` stores it beside the event and appends nothing when the stream's newest entry has
that key: a publish whose answer was lost in a broken connection is retried without a duplicate."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from ..._redact import redact_url
from . import START, BusEvent, BusUnavailable

__all__ = ["CONNECT_TIMEOUT", "DEFAULT_BLOCK", "RedisBus"]

log = logging.getLogger("geppetto.events.bus")
T = TypeVar("T")

DEFAULT_BLOCK = 5.0
"""Seconds one ``XREAD`` waits for new events before it is sent again."""
_SOCKET_MARGIN = 10.0
"""Seconds the socket timeout exceeds the wait by: time for Redis to answer once the wait ends."""
_BATCH = 256
CONNECT_TIMEOUT = 2.0
"""Seconds a new connection to Redis may take: an unreachable broker is reported within this (a refused
one at once)."""

_APPEND = """
local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)[1]
if ARGV[2] ~= '' and newest then
  local fields = newest[2]
  for i = 1, #fields, 2 do
    if fields[i] == 'k' and fields[i + 1] == ARGV[2] then return newest[1] end
  end
end
local id
if ARGV[2] ~= '' then
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 'd', ARGV[1], 'k', ARGV[2])
else
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 'd', ARGV[1])
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
return id
"""
"""Append an event (field ``d``, and its key in ``k``) unless the stream's newest entry has the same key;
trim to the retention, renew the expiry. One script, so the check and the append are one step."""


def _key(topic: str) -> str:
    return f"geppetto:events:{topic}"


class RedisBus:
    def __init__(self, url: str, *, retention: int, ttl: float, block: float = DEFAULT_BLOCK) -> None:
        self.url = url
        self.location = redact_url(url)
        self.retention = retention
        self.ttl = max(1, int(ttl))
        self.block = block
        self._block_ms = max(1, int(block * 1000))
        self._client: aioredis.Redis | None = None
        self._append: Any = None

    def _redis(self) -> aioredis.Redis:
        if self._client is None:
            # The URL's own options (?socket_timeout=) win over these keywords.
            client = aioredis.Redis.from_url(
                self.url,
                max_connections=10_000,
                socket_timeout=self.block + _SOCKET_MARGIN,
                socket_connect_timeout=CONNECT_TIMEOUT,
            )
            timeout = client.connection_pool.connection_kwargs.get("socket_timeout")
            wait = self.block if not timeout else min(self.block, float(timeout) / 2)
            self._block_ms = max(1, int(wait * 1000))
            self._client = client
        return self._client

    def _unreachable(self, exc: Exception) -> BusUnavailable:
        return BusUnavailable(f"the Redis event bus {self.location} failed: {exc}; check that Redis runs there")

    async def _twice(self, send: Callable[[], Awaitable[T]]) -> T:
        """``send()``, once more on a fresh connection when the pooled one was dropped (a Redis restart
        while idle: the pool still holds connections to the old process); any other failure, or a second
        one, is :class:`BusUnavailable`. Safe to repeat: reads are, and a keyed publish appends once."""
        try:
            return await send()
        except RedisConnectionError as exc:
            log.info("the Redis event bus %s dropped a pooled connection (%s); trying a new one", self.location, exc)
        except RedisError as exc:
            raise self._unreachable(exc) from exc
        try:
            return await send()
        except RedisError as exc:
            raise self._unreachable(exc) from exc

    async def publish(self, topic: str, data: dict[str, Any], *, key: str | None = None) -> str:
        client = self._redis()
        if self._append is None:
            self._append = client.register_script(_APPEND)
        args = [json.dumps(data, default=str), key or "", self.retention, self.ttl]
        entry_id = await self._twice(lambda: self._append(keys=[_key(topic)], args=args))
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    async def last_id(self, topic: str) -> str:
        client = self._redis()
        newest = await self._twice(lambda: client.xrevrange(_key(topic), count=1))
        if not newest:
            return START
        entry_id = newest[0][0]
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    async def subscribe(self, topic: str, after: str = START) -> AsyncIterator[BusEvent]:
        key = _key(topic)
        cursor = _cursor(after)
        client = self._redis()
        while True:
            streams: dict[Any, Any] = {key: cursor}
            batches: Any = await self._twice(
                functools.partial(client.xread, streams, count=_BATCH, block=self._block_ms)
            )
            for _stream, entries in batches or ():
                for entry_id, fields in entries:
                    cursor = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
                    yield BusEvent(cursor, json.loads(fields[b"d"]))

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _cursor(after: str) -> str:
    if after == START:
        return "0-0"
    head, _, tail = after.partition("-")
    if not (head.isdigit() and (tail == "" or tail.isdigit())):
        raise ValueError(f"event id {after!r} is not one this bus gave out; reconnect without an id")
    return after
