"""Publishing a worker's events while the broker may fail: in order per topic, tried again with backoff, and
never a silent gap.

A publish that fails puts the event in its topic's outbox, and every later event of that topic waits behind
it (a session's events keep their order). One task per outbox sends it, oldest first, trying again after
``first_delay`` seconds, doubling up to ``max_delay``, for as long as the worker runs; when the outbox is
empty the topic publishes directly again. An outbox holds at most ``limit`` events (the bus's retention: the
broker would trim a longer one anyway). Past that, the engine's events are dropped (``run_started`` and
``run_finished`` never are) and an :data:`EVENTS_MISSING` event takes their place: the inference they belonged
to, how many, and the route that reads the inference's full event log from the store. A reader therefore
gets every event or is told, at the place of the gap, what it missed and where to read it.

Each event has a key the bus uses to append it once, so an event whose publish reached the broker just as
the connection broke is not repeated by the retry.

A worker that stops while an outbox still waits tries to send it for the shutdown grace, then logs what it
could not send (an error naming the session and the count) and counts it in the metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..events.bus import DEFAULT_RETENTION, EventBus
from ..turns import new_id
from ._metrics import server_metrics

__all__ = ["EVENTS_MISSING", "Publisher", "missing_notice", "missing_payload"]

log = logging.getLogger("geppetto.server")

EVENTS_MISSING = "events_missing"
"""The event published in place of events an outbox had to drop."""

_KEPT = frozenset({"run_started", "run_finished", EVENTS_MISSING})
"""Event types an outbox never drops (a reader needs them to know where an inference begins and ends)."""


def missing_notice(topic: str, inference_id: str, count: int) -> dict[str, Any]:
    return {
        "type": EVENTS_MISSING,
        "session_id": topic,
        "inference_id": inference_id,
        "count": count,
        "reason": "the event bus was unavailable and this worker's outbox was full",
        "log": f"/api/sessions/{topic}/inspect",
    }


def missing_payload(event: dict[str, Any]) -> dict[str, Any]:
    """What the protocol streams pass on of an :data:`EVENTS_MISSING` event."""
    return {k: event[k] for k in ("inference_id", "count", "reason", "log") if k in event}


@dataclass(eq=False)
class _Entry:
    data: dict[str, Any]
    key: str = field(default_factory=new_id)
    """The event's idempotency key: a retry of a publish that reached the broker appends nothing."""


@dataclass
class _Outbox:
    entries: deque[_Entry] = field(default_factory=deque)
    sending: _Entry | None = None
    since: float = field(default_factory=time.monotonic)
    task: asyncio.Task[None] | None = None


class Publisher:
    """Publishes to ``bus`` for one worker; :meth:`publish` never raises for a broker that fails."""

    def __init__(
        self,
        bus: EventBus,
        *,
        limit: int = DEFAULT_RETENTION,
        first_delay: float = 0.2,
        max_delay: float = 5.0,
    ) -> None:
        self.bus, self.limit, self.first_delay, self.max_delay = bus, max(1, limit), first_delay, max_delay
        self._outboxes: dict[str, _Outbox] = {}

    def waiting(self, topic: str) -> int:
        """How many events of ``topic`` wait for the broker."""
        box = self._outboxes.get(topic)
        return len(box.entries) if box is not None else 0

    async def publish(self, topic: str, data: dict[str, Any], *, key: str | None = None) -> str | None:
        """Publish ``data`` to ``topic``: its id, or None when it waits in the outbox (the broker failed).

        ``key``: the event's own idempotency key (see :meth:`EventBus.publish`), when the caller may publish
        it again from another process; a fresh one by default."""
        entry = _Entry(data) if key is None else _Entry(data, key)
        box = self._outboxes.get(topic)
        if box is None:
            try:
                return await self.bus.publish(topic, data, key=entry.key)
            except Exception as exc:  # the broker's own errors (BusUnavailable) and its client's
                server_metrics.count("publish_failures", _kind(self.bus))
                log.warning(
                    "could not publish to session %s on the event bus (%s); its events wait and are sent again "
                    "when the bus answers",
                    topic,
                    exc,
                )
                box = self._outboxes[topic] = _Outbox()
                box.task = asyncio.get_running_loop().create_task(self._drain(topic, box))
        self._put(topic, box, entry)
        return None

    def _put(self, topic: str, box: _Outbox, entry: _Entry) -> None:
        if len(box.entries) < self.limit or entry.data.get("type") in _KEPT:
            box.entries.append(entry)
            return
        server_metrics.count("events_dropped", "outbox_full")
        inference_id = str(entry.data.get("inference_id", ""))
        tail = box.entries[-1] if box.entries else None
        if (
            tail is not None
            and tail is not box.sending
            and tail.data.get("type") == EVENTS_MISSING
            and tail.data.get("inference_id") == inference_id
        ):
            tail.data["count"] += 1
            return
        log.error(
            "the event bus outbox of session %s is full (%d events); events of inference %s are dropped and an "
            "%s event tells readers to read them from the store",
            topic,
            self.limit,
            inference_id,
            EVENTS_MISSING,
        )
        box.entries.append(_Entry(missing_notice(topic, inference_id, 1)))

    async def _drain(self, topic: str, box: _Outbox) -> None:
        delay = self.first_delay
        sent = 0
        while box.entries:
            box.sending = entry = box.entries[0]
            try:
                await self.bus.publish(topic, entry.data, key=entry.key)
            except Exception as exc:
                server_metrics.count("publish_failures", _kind(self.bus))
                log.debug("publishing to session %s failed again (%s); next try in %.1f s", topic, exc, delay)
                box.sending = None
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_delay)
                continue
            box.entries.popleft()
            box.sending = None
            sent += 1
            delay = self.first_delay
        del self._outboxes[topic]
        log.warning(
            "the event bus answers again: published the %d events of session %s that waited %.1f s",
            sent,
            topic,
            time.monotonic() - box.since,
        )

    async def close(self, grace: float = 10.0) -> None:
        """Let the outboxes send for up to ``grace`` seconds, then give up on what is left (logged, counted)."""
        tasks = {box.task for box in self._outboxes.values() if box.task is not None}
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        for topic, box in list(self._outboxes.items()):
            if box.task is not None:
                box.task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await box.task
            lost = sum(e.data["count"] if e.data.get("type") == EVENTS_MISSING else 1 for e in box.entries)
            server_metrics.count("events_dropped", "shutdown", lost)
            log.error(
                "the worker stops with %d events of session %s never published (the event bus did not answer "
                "for %.1f s); the inferences' events are in the store: GET /api/sessions/%s/inspect",
                lost,
                topic,
                time.monotonic() - box.since,
                topic,
            )
        self._outboxes.clear()


def _kind(bus: EventBus) -> str:
    return bus.url.partition(":")[0] or "memory"
