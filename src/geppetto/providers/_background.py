"""What ``geppetto serve`` hears from a stateful engine's background request, and how it hands one to
another process: one mechanism for the Responses engine's background responses and the Interactions
engine's background interactions.

While an engine reads a background request's events it tells :data:`BACKGROUND_OBSERVER` the id the server
gave the request (with the Turn it was sent for) and, before each event is published, the event's place in
the stream (a number that grows by one or more per event: the Responses API's ``sequence_number``, the
Interactions engine's count of events) with what the service needs to resume after it (``resume_after``:
the Interactions API's opaque ``event_id``; None when the number is enough). A process that picks the
request up sets :data:`PENDING_RESPONSE` and the engine reads the same request on from there instead of
sending a new one.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from geppetto.turns import Turn

__all__ = ["BACKGROUND_OBSERVER", "PENDING_RESPONSE", "BackgroundObserver", "PendingResponse", "take_pending"]

log = logging.getLogger("geppetto.providers")


class BackgroundObserver(Protocol):
    """Told about a background request as it goes (``geppetto serve`` persists what it hears)."""

    def created(self, response_id: str, turn: Turn) -> None:
        """The server created ``response_id`` for ``turn`` (the Turn as the engine received it)."""

    def advanced(self, response_id: str, cursor: int, resume_after: str | None = None) -> None:
        """The event at ``cursor`` of ``response_id`` was received (and is about to be published);
        ``resume_after`` is what a resume after it names, when the cursor alone does not."""

    def cancels_response(self) -> bool:
        """Whether a cancelled caller cancels the request on the server (False: another process will
        pick it up, e.g. a server worker that lost its session or shuts down)."""


BACKGROUND_OBSERVER: ContextVar[BackgroundObserver | None] = ContextVar("geppetto_background_observer", default=None)
"""The observer of the background requests made in this context (None: nobody follows them)."""


@dataclass(frozen=True)
class PendingResponse:
    """A background request another process created and did not finish reading: the next background
    request of a Turn of ``blocks`` blocks reads it from after ``after`` (and ``resume_after``, for an
    engine that resumes by an event id) instead of sending a new one."""

    response_id: str
    after: int
    blocks: int
    resume_after: str | None = None


PENDING_RESPONSE: ContextVar[PendingResponse | None] = ContextVar("geppetto_pending_response", default=None)
"""A request to pick up instead of sending the next background request in this context (used once)."""


def take_pending(turn: Turn, engine: str = "responses") -> PendingResponse | None:
    """The pending request for this Turn, once: None when there is none or it belongs to another Turn."""
    pending = PENDING_RESPONSE.get()
    if pending is None:
        return None
    PENDING_RESPONSE.set(None)
    if pending.blocks != len(turn.blocks):
        log.warning(
            "%s: background request %s was created for a Turn of %d blocks, this one has %d; "
            "sending a new request instead of picking it up",
            engine,
            pending.response_id,
            pending.blocks,
            len(turn.blocks),
        )
        return None
    return pending
