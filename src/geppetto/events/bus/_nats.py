"""The NATS JetStream event bus: one stream (``GEPPETTO_EVENTS``) whose subjects are
``geppetto.events.<topic>``, keeping ``retention`` messages per subject for ``ttl`` seconds; ids are the
stream sequence numbers (increasing within a topic, with gaps).

The client reconnects without limit (every ``RECONNECT_WAIT`` seconds, with the client's jitter) while the
server is away, and a client that closed anyway is replaced at the next use, so a worker recovers when NATS
comes back, however long it was gone."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import nats
from nats.errors import Error as NatsError
from nats.js.api import ConsumerConfig, DeliverPolicy, StreamConfig
from nats.js.errors import NoStreamResponseError, NotFoundError

from ..._redact import redact_url
from . import START, BusEvent, BusUnavailable, _integer_cursor

__all__ = ["NatsBus"]

log = logging.getLogger("geppetto.events.bus")
T = TypeVar("T")

STREAM = "GEPPETTO_EVENTS"
RECONNECT_WAIT = 0.5
"""Seconds between the client's attempts to reconnect (it never stops trying). The client's first attempt
comes at once, usually before a restarted server listens, so the wait is what a restart while idle costs:
kept well under ``RECONNECT_GRACE``, so the first call after a restart finds the client connected again."""
PUBLISH_TIMEOUT = 2.0
"""Seconds a publish (or a read of the newest id) waits for JetStream's answer before it counts as failed."""
RECONNECT_GRACE = 2.0
"""Seconds a failed call waits for the client to be connected again before its one retry (a restart
while idle: the client finds out only when the first call after it is lost); still away then, the call
fails at once."""
_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")


def _subject(topic: str) -> str:
    # A subject token may not hold '.', '*', '>' or spaces: other topics are hex-encoded.
    return f"geppetto.events.{topic if _TOKEN.match(topic) else 'x' + topic.encode().hex()}"


class NatsBus:
    def __init__(self, url: str, *, retention: int, ttl: float) -> None:
        self.url = url
        self.location = redact_url(url)
        self.retention = retention
        self.ttl = ttl
        self._nc: Any = None
        self._js: Any = None
        self._ready = asyncio.Lock()

    def _unreachable(self, exc: BaseException) -> BusUnavailable:
        if isinstance(exc, NoStreamResponseError):  # the server lost the stream (a restart without its store)
            self._js = None
        return BusUnavailable(
            f"the NATS event bus {self.location} failed: {exc or type(exc).__name__}; check that nats-server runs "
            "there with JetStream on (-js)"
        )

    async def _jetstream(self) -> Any:
        async with self._ready:
            if self._nc is not None and self._nc.is_closed:
                self._nc = self._js = None
            if self._js is None:
                try:
                    nc = self._nc or await self._connect()
                    js = nc.jetstream(timeout=PUBLISH_TIMEOUT)
                    config = StreamConfig(
                        name=STREAM,
                        subjects=["geppetto.events.>"],
                        max_msgs_per_subject=self.retention,
                        max_age=self.ttl,
                    )
                    try:
                        await js.add_stream(config)
                    except NatsError:
                        await js.update_stream(config)
                except (NatsError, OSError, TimeoutError) as exc:
                    raise self._unreachable(exc) from exc
                self._js = js
            return self._js

    async def _connect(self) -> Any:
        # A first connection that fails is an error at once (the caller retries); once connected, the client
        # reconnects for as long as the server is away. nats-py has one setting for both, read when it
        # reconnects, hence the change after connecting.
        nc = await nats.connect(
            self.url,
            connect_timeout=5,
            allow_reconnect=True,
            max_reconnect_attempts=1,
            reconnect_time_wait=RECONNECT_WAIT,
            disconnected_cb=self._disconnected,
            reconnected_cb=self._reconnected,
            error_cb=self._error,
        )
        nc.options["max_reconnect_attempts"] = -1
        self._nc = nc
        return nc

    async def _disconnected(self) -> None:
        log.warning("the NATS event bus %s is disconnected; reconnecting", self.location)

    async def _reconnected(self) -> None:
        log.warning("the NATS event bus %s is connected again", self.location)

    async def _error(self, exc: Exception) -> None:
        log.debug("the NATS event bus %s: %s", self.location, exc or type(exc).__name__)

    async def _twice(self, call: Callable[[Any], Awaitable[T]]) -> T:
        """``call(jetstream)``, once more when it failed while the connection was being replaced (a NATS
        restart while idle) and the client is connected again within ``RECONNECT_GRACE`` seconds; else,
        or on a second failure, :class:`BusUnavailable`. Safe to repeat: reads are, and a keyed publish
        is kept once (JetStream's duplicate window)."""
        if self._nc is not None and self._nc.is_reconnecting and not await self._connected_again():
            # Known to be away: said at once rather than after a call's timeout.
            raise self._unreachable(ConnectionError("the server is away; the client is reconnecting"))
        try:
            return await call(await self._jetstream())
        except NotFoundError:
            raise
        except (NatsError, TimeoutError) as exc:
            if not await self._connected_again():
                raise self._unreachable(exc) from exc
            log.info(
                "the NATS event bus %s: a call failed across a reconnect (%s); trying it again", self.location, exc
            )
        try:
            return await call(await self._jetstream())
        except NotFoundError:
            raise
        except (NatsError, TimeoutError) as exc:
            raise self._unreachable(exc) from exc

    async def _connected_again(self) -> bool:
        deadline = time.monotonic() + RECONNECT_GRACE
        while time.monotonic() < deadline:
            if self._nc is not None and self._nc.is_connected:
                return True
            if self._nc is None or self._nc.is_closed:
                return True  # replaced at the next call
            await asyncio.sleep(0.05)
        return False

    async def publish(self, topic: str, data: dict[str, Any], *, key: str | None = None) -> str:
        # JetStream drops a message whose Nats-Msg-Id it saw within the stream's duplicate window (2 min)
        # and acknowledges it with the first one's sequence.
        headers = {"Nats-Msg-Id": key} if key else None
        body = json.dumps(data, default=str).encode()
        ack = await self._twice(
            lambda js: js.publish(_subject(topic), body, stream=STREAM, headers=headers, timeout=PUBLISH_TIMEOUT)
        )
        return str(ack.seq)

    async def last_id(self, topic: str) -> str:
        try:
            message = await self._twice(lambda js: js.get_last_msg(STREAM, _subject(topic)))
        except NotFoundError:
            return START
        return str(message.seq)

    async def subscribe(self, topic: str, after: str = START) -> AsyncIterator[BusEvent]:
        position = _integer_cursor(after)
        js = await self._jetstream()
        if position == 0:
            config = ConsumerConfig(deliver_policy=DeliverPolicy.ALL)
        else:
            config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=position + 1)
        try:
            sub = await js.subscribe(_subject(topic), ordered_consumer=True, config=config)
        except (NatsError, TimeoutError) as exc:
            raise self._unreachable(exc) from exc
        try:
            async for message in sub.messages:
                seq = message.metadata.sequence.stream
                if seq <= position:
                    continue
                position = seq
                yield BusEvent(str(seq), json.loads(message.data))
        finally:
            with contextlib.suppress(NatsError, TimeoutError):
                await sub.unsubscribe()

    async def close(self) -> None:
        if self._nc is not None:
            try:
                await self._nc.drain()
            except (NatsError, TimeoutError):
                await self._nc.close()
            self._nc = self._js = None
