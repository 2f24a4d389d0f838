"""What the SQL stores answer with: snapshot, session and inference records, and session leases."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["InferenceRecord", "SessionInfo", "SessionLease", "SessionSummary", "SnapshotInfo", "lock_key"]


@dataclass(frozen=True)
class SnapshotInfo:
    seq: int
    turn_id: str
    inference_id: str | None
    saved_at: float | None
    blocks: int


@dataclass(frozen=True)
class InferenceRecord:
    """One inference a server ran: ``running`` until it ends ``completed``, ``failed`` or ``cancelled``."""

    session_id: str
    inference_id: str
    status: str
    worker: str | None
    prompt: str | None
    started_at: float
    ended_at: float | None
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


class _KeyHolder(Protocol):
    def _release_key(self, key: int) -> None: ...


class SessionLease:
    """The right to run one session's inference, held until :meth:`release` (or until the process holding it
    exits: the lock is the database's or the file system's, so a killed worker frees it)."""

    def __init__(self, store: _KeyHolder, session_id: str, key: int) -> None:
        self.store, self.session_id, self.key = store, session_id, key
        self.released = False

    async def release(self) -> None:
        if not self.released:
            self.released = True
            await asyncio.to_thread(self.store._release_key, self.key)


def lock_key(session_id: str) -> int:
    """A signed 63-bit number for ``session_id`` (an advisory-lock key, a lock-file offset)."""
    return int.from_bytes(hashlib.sha256(f"geppetto-session:{session_id}".encode()).digest()[:8], "big") >> 1


@dataclass(frozen=True)
class SessionInfo:
    """A line of ``geppetto sessions list``: the session, its snapshot count, last save and first prompt."""

    session_id: str
    snapshots: int
    updated_at: float | None
    blocks: int
    first_prompt: str
    provider: str = ""
    model: str = ""
    mode: str = ""
    usage: dict[str, Any] | None = None
    """The session's usage totals as its latest snapshot recorded them (``SessionUsage.to_dict()``; None when
    its engine reported no usage)."""

    def to_dict(self) -> dict[str, Any]:
        usage = {"usage": self.usage} if self.usage is not None else {}  # absent for a session with none
        return {
            "session_id": self.session_id,
            "snapshots": self.snapshots,
            "updated_at": self.updated_at,
            "blocks": self.blocks,
            "first_prompt": self.first_prompt,
            "provider": self.provider,
            "model": self.model,
            "mode": self.mode,
            **usage,
        }


@dataclass(frozen=True)
class SessionSummary:
    """What the store kept for a session at save time: how many events it recorded (0: no event log) and
    the request totals of the dashboard summed over them (``web.session_totals``'s ``totals``; None when
    there are none)."""

    session_id: str
    events: int
    totals: dict[str, Any] | None
    first_prompt: str = ""
    """The session's first user text (what the dashboard names it by)."""
