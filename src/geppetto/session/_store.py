"""Where a session's turn snapshots are kept: the ``TurnStore`` protocol, event logs, and an in-memory store."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..events import Event
from ..tools import JournalRecord
from ..turns import TURN_META_INFERENCE_ID, Frozen, LazyBlockList, Turn, TurnData, TurnMetadata, copy_json, freeze

__all__ = ["EventLogStore", "MemoryTurnStore", "RecordedEvent", "TurnStore", "event_json"]

# An event as a session records it: (time.time() when published, the event).
TimedEvent = tuple[float, Event]


def event_json(event: Event) -> str:
    """The JSON form of an event (values JSON cannot hold are written as their ``str``)."""
    return json.dumps(event.to_dict(), ensure_ascii=False, default=str)


@dataclass(frozen=True)
class RecordedEvent:
    """One event of an inference's log: its position, when it was published (Unix seconds) and its dict form."""

    inference_id: str
    seq: int
    at: float
    type: str
    event: dict[str, Any]


@runtime_checkable
class TurnStore(Protocol):
    """Persistence for session histories. A session calls :meth:`save_snapshot` after every completed
    inference with the output turn; stores keep snapshots in the order they were saved."""

    async def save_snapshot(self, session_id: str, turn: Turn) -> None: ...

    async def load_session(self, session_id: str) -> list[Turn]:
        """The snapshots saved for ``session_id``, oldest first (empty when unknown)."""
        ...

    async def list_sessions(self) -> list[str]:
        """Every session id with at least one snapshot, in the order first saved."""
        ...


@runtime_checkable
class EventLogStore(TurnStore, Protocol):
    """A store that also keeps each inference's events (``Session(..., record_events=True)``)."""

    async def save_snapshot(self, session_id: str, turn: Turn, *, events: Sequence[TimedEvent] | None = None) -> None:
        """Save the snapshot and the events of the inference that produced it, atomically."""
        ...

    async def save_events(self, session_id: str, inference_id: str, events: Sequence[TimedEvent]) -> None:
        """Save the events of an inference that produced no snapshot (it failed or was cancelled)."""
        ...

    async def load_events(self, session_id: str, inference_id: str | None = None) -> list[RecordedEvent]:
        """The recorded events of a session (or of one of its inferences): inferences in the order they
        began, each one's events in the order published."""
        ...


def recorded(inference_id: str, events: Sequence[TimedEvent]) -> list[RecordedEvent]:
    """``events`` as they read back from a store: JSON round-tripped, numbered from 0."""
    return [RecordedEvent(inference_id, i, at, e.type, json.loads(event_json(e))) for i, (at, e) in enumerate(events)]


class MemoryTurnStore:
    """An :class:`EventLogStore` in a dict: for tests and short-lived processes. Stores and returns copies."""

    reads_at_once = True
    """``save_snapshot`` reads all it keeps of the Turn before it first awaits: a Session may hand it its
    own output rather than a copy (a store without this attribute is given a copy)."""

    def __init__(self) -> None:
        # Per snapshot: its id, metadata, data and frozen blocks (unchanged blocks shared between snapshots).
        self._sessions: dict[str, list[tuple[str, dict[str, Any], dict[str, Any], Frozen]]] = {}
        self._events: dict[str, list[RecordedEvent]] = {}
        self._verdicts: dict[tuple[str, str], dict[str, Any]] = {}
        self._journal: dict[str, dict[tuple[str, str], JournalRecord]] = {}

    async def save_snapshot(self, session_id: str, turn: Turn, *, events: Sequence[TimedEvent] | None = None) -> None:
        held = self._sessions.setdefault(session_id, [])
        blocks = turn.blocks
        if isinstance(blocks, LazyBlockList) and blocks.origin is not None:
            frozen = freeze(blocks, blocks.origin)
        else:
            frozen = freeze(blocks, held[-1][3] if held else None)
        held.append((turn.id, copy_json(dict(turn.metadata)), copy_json(dict(turn.data)), frozen))
        if events:
            await self.save_events(session_id, TURN_META_INFERENCE_ID.get(turn.metadata) or "", events)

    async def load_endpoint_verdict(self, base_url: str, model: str) -> dict[str, Any] | None:
        """The verdict saved for a Responses endpoint (base URL and model), None when there is none."""
        kept = self._verdicts.get((base_url, model))
        return dict(kept) if kept is not None else None

    async def save_endpoint_verdict(self, base_url: str, model: str, verdict: dict[str, Any]) -> None:
        """Keep ``verdict`` for the endpoint, replacing the one saved before."""
        self._verdicts[(base_url, model)] = dict(verdict)

    async def save_events(self, session_id: str, inference_id: str, events: Sequence[TimedEvent]) -> None:
        self._events.setdefault(session_id, []).extend(recorded(inference_id, events))

    async def load_events(self, session_id: str, inference_id: str | None = None) -> list[RecordedEvent]:
        return [e for e in self._events.get(session_id, []) if inference_id in (None, e.inference_id)]

    async def load_session(self, session_id: str) -> list[Turn]:
        return [_turn(*held) for held in self._sessions.get(session_id, [])]

    # -- the journal of side effects (geppetto.tools._journal) -------------------------------------
    async def journal_write(self, session_id: str, inference_id: str, entry: str, record: dict[str, Any]) -> None:
        rows = self._journal.setdefault(session_id, {})
        kept = rows.get((inference_id, entry))
        at = kept.at if kept is not None else time.time()
        rows[inference_id, entry] = JournalRecord(inference_id, entry, json.loads(json.dumps(record)), at)

    async def journal_read(self, session_id: str) -> list[JournalRecord]:
        return [
            JournalRecord(r.inference_id, r.entry, json.loads(json.dumps(r.record)), r.at)
            for r in self._journal.get(session_id, {}).values()
        ]

    async def journal_clear(self, session_id: str) -> None:
        self._journal.pop(session_id, None)

    async def load_latest(self, session_id: str) -> Turn | None:
        held = self._sessions.get(session_id)
        return _turn(*held[-1]) if held else None

    async def load_snapshot(self, session_id: str, seq: int) -> Turn | None:
        held = self._sessions.get(session_id, [])
        return _turn(*held[seq - 1]) if 1 <= seq <= len(held) else None

    async def latest_seq(self, session_id: str) -> int:
        return len(self._sessions.get(session_id, []))

    async def list_sessions(self) -> list[str]:
        return list(self._sessions)


def _turn(turn_id: str, metadata: dict[str, Any], data: dict[str, Any], frozen: Frozen) -> Turn:
    return Turn(frozen.lazy(), turn_id, TurnMetadata(copy_json(metadata)), TurnData(copy_json(data)))
