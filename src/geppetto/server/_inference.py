"""What a server worker's inferences are: the events that start and end one, an inference running here, a
session kept hot after its inference, and how an inference a stopped worker left is prepared to go on.
:class:`~geppetto.server._runner.Runner` runs them."""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import dataclass, field
from typing import Any

from ..providers import PENDING_RESPONSE
from ..session import ExecutionHandle, Session, prepare_go_on
from ..session.stores import BackgroundRecord, SessionLease
from ..tools import JournalRecord, rebuild
from ..turns import Turn
from ._background import Published, pending_for

__all__ = [
    "HANDED_OVER",
    "HOT_SESSIONS",
    "RUN_FINISHED",
    "RUN_STARTED",
    "SWEEP_INTERVAL",
    "NotFound",
    "picked_up",
    "worker_name",
]

RUN_STARTED = "run_started"
RUN_FINISHED = "run_finished"
HANDED_OVER = "handed_over"
"""The end of an inference a stopping worker leaves running: its background response goes on server-side."""
SWEEP_INTERVAL = 10.0
"""Seconds between two sweeps of a worker (its lease check, stale inferences settled)."""
HOT_SESSIONS = 256
"""How many sessions a worker keeps in memory after their inference (the most recently run)."""


class NotFound(LookupError):
    """No such session (the message says so and how to list them)."""


@dataclass
class _Running:
    inference_id: str
    handle: ExecutionHandle | None = None
    cancelled: bool = False
    reason: str | None = None  # why it was cancelled, when not by a request
    lease: SessionLease | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    resume: BackgroundRecord | None = None  # the background response a worker that died was reading
    journal: list[JournalRecord] | None = None  # the journal it left


@dataclass
class _Hot:
    """A session this worker ran last: the store's snapshot number it holds, and the settings it was made with."""

    seq: int
    settings: dict[str, Any]
    session: Session


def _goes_past(turn: Turn, sent: Turn) -> bool:
    """Whether ``turn`` (rebuilt from a journal) holds ``sent`` (the Turn a background request was sent for)
    and more: the request's answer came and the journal was written after it."""
    if len(turn.blocks) <= len(sent.blocks):
        return False
    ids = [b.id for b in list.__iter__(turn.blocks)]
    return ids[: len(sent.blocks)] == [b.id for b in list.__iter__(sent.blocks)]


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


async def picked_up(session: Session, text: str, running: _Running, published: Published) -> None:
    """Prepare ``session`` for an inference a stopped worker left: from the Turn its journal holds when that
    is newer than the background response it was reading (its tools then ran or were running: they are
    answered from the journal, not run again); else from the Turn and cursor of that response; else
    prompted again."""
    records = running.journal or []
    turn = rebuild(records, running.inference_id, session.latest) if records else None
    record = running.resume
    if turn is not None and (record is None or _goes_past(turn, record.turn)):
        if record is not None:
            await published.picked_up(record)  # its events are all published: the response is not read again
            running.resume = None
        else:
            await published.set_aside()
        prepare_go_on(session, running.inference_id, records, turn)
        return
    if record is None:
        session.prompt(text)
        return
    await published.picked_up(record)
    session.append(record.turn)
    session._resume_journal = (running.inference_id, records)
    PENDING_RESPONSE.set(pending_for(record))
