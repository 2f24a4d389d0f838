"""Inferences that read a background response (``ResponsesEngine(background=True)``) or a background
interaction (``InteractionsEngine(background=True)``) survive the worker: one mechanism for both.

While a worker runs an inference, :class:`Follow` hears from the engine which response it reads and how far
(:data:`~geppetto.providers._background.BACKGROUND_OBSERVER`); the runner's event pump records the response
id (with the Turn the engine sent it for) and, after each event it published, the cursor it came from (the
Responses API's ``sequence_number``; for an interaction, the event's place in its stream with its
``event_id``, which a resume names) in ``background_responses``. Each such event goes to the bus
with a key made of the inference, the response and that number, so the one event a dying worker may have
published without recording it is not appended again when the next worker sends it (the bus skips an event
whose key is its newest's).

When a worker dies mid-run, another worker's sweep finds the inference running with nobody holding its
session (twice in a row, as for any stale inference) and, when it was reading a background response, picks
it up instead of marking it failed: it restores the recorded Turn and lets the engine read the same response
from after the recorded number (:data:`~geppetto.providers._background.PENDING_RESPONSE`).
The inference keeps its id, so a client that reconnects to ``/events`` with ``Last-Event-ID`` reads on.

A client's stop (``POST /api/sessions/{id}/cancel``) cancels the response on the server; a worker that loses
its session's lease or shuts down leaves it running for the worker that picks the inference up.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from ..providers import PendingResponse
from ..session.stores import (
    BackgroundRecord,
    SQLTurnStore,
    background_response,
    forget_background_response,
    save_background_cursor,
    save_background_response,
    set_events_aside,
)
from ..turns import Turn, turn_to_dict

__all__ = ["At", "Created", "Follow", "Published", "pending_for", "record_of"]

log = logging.getLogger("geppetto.server")


@dataclass(frozen=True)
class Created:
    """Queued for the pump: the engine's background response ``response_id`` for the Turn ``turn``."""

    response_id: str
    turn: dict[str, Any]


@dataclass(frozen=True)
class At:
    """Where a published event stands in its background response: the cursor, and the event id a resume
    after it names (None: the cursor says it, as a ``sequence_number`` does)."""

    cursor: int = -1
    resume_after: str | None = None


@dataclass
class Follow:
    """What one inference's engine said about the background response it reads (a ``BackgroundObserver``).

    ``stopped()`` says whether the inference was cancelled by a client (then the response is cancelled on
    the server too)."""

    queue: asyncio.Queue[Any]
    inference_id: str
    stopped: Any  # () -> bool
    response_id: str = ""
    cursor: int = -1
    resume_after: str | None = None
    _same: int = 0  # events already keyed at this cursor
    _keyed: int = -1

    def created(self, response_id: str, turn: Turn) -> None:
        self.response_id, self.cursor, self.resume_after = response_id, -1, None
        self.queue.put_nowait(Created(response_id, turn_to_dict(turn)))

    def advanced(self, response_id: str, cursor: int, resume_after: str | None = None) -> None:
        self.response_id, self.cursor, self.resume_after = response_id, cursor, resume_after

    def cancels_response(self) -> bool:
        return bool(self.stopped())

    def key(self) -> tuple[str | None, At]:
        """The bus key of the event published now, and where it stands (cursor -1: no background response)."""
        if not self.response_id or self.cursor < 0:
            return None, At()
        if self.cursor != self._keyed:
            self._keyed, self._same = self.cursor, 0
        else:
            self._same += 1
        return f"{self.inference_id}:{self.response_id}:{self.cursor}:{self._same}", At(self.cursor, self.resume_after)


@dataclass
class Published:
    """The pump's record of how far the events of a background response were published."""

    store: SQLTurnStore
    session_id: str
    inference_id: str
    response_id: str = ""
    cursor: int = -1
    failed: set[str] = field(default_factory=set)

    async def created(self, item: Created) -> None:
        self.response_id, self.cursor = item.response_id, -1
        await self._guard(
            "the response",
            save_background_response(self.store, self.session_id, self.inference_id, item.response_id, item.turn),
        )

    async def published(self, at: At) -> None:
        if at.cursor <= self.cursor or not self.response_id:
            return
        self.cursor = at.cursor
        save = save_background_cursor(
            self.store, self.session_id, self.inference_id, self.response_id, at.cursor, at.resume_after
        )
        await self._guard("the cursor", save)

    async def picked_up(self, record: BackgroundRecord) -> None:
        """Go on from ``record``: its response and cursor, the events its worker recorded set before ours."""
        self.response_id, self.cursor = record.response_id, record.cursor
        await self.set_aside()

    async def set_aside(self) -> None:
        """The events a stopped worker recorded for this inference go before ours (a pickup from its journal)."""
        await self._guard("the earlier events", set_events_aside(self.store, self.session_id, self.inference_id))

    async def forget(self) -> None:
        if self.response_id:
            await self._guard("the end", forget_background_response(self.store, self.session_id, self.inference_id))

    async def _guard(self, what: str, write: Any) -> None:
        try:
            await write
        except Exception as exc:  # the inference goes on; only a pickup after a crash would lack it
            if what not in self.failed:
                self.failed.add(what)
                log.warning(
                    "could not record %s of background response %s of inference %s (%s); if this worker dies, "
                    "another cannot pick the inference up from it",
                    what,
                    self.response_id,
                    self.inference_id,
                    exc,
                )


async def record_of(store: SQLTurnStore, session_id: str, inference_id: str) -> BackgroundRecord | None:
    """The background response a stale inference was reading (None: it read none, or the record is unreadable)."""
    try:
        return await background_response(store, session_id, inference_id)
    except Exception as exc:
        log.warning("could not read the background response of inference %s (%s); settling it", inference_id, exc)
        return None


def pending_for(record: BackgroundRecord) -> PendingResponse:
    return PendingResponse(record.response_id, record.cursor, len(record.turn.blocks), record.resume_after)
