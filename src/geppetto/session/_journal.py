"""A session's side of the journal (``geppetto.tools._journal``): finding an inference that was cut off mid
tool loop when a session is restored, and the Turn it goes on from (:meth:`Session.resume <geppetto.Session.resume>`).
The session itself keeps which inference was interrupted and adds that Turn to its history."""

from __future__ import annotations

from typing import Any, Protocol

from ..tools import JournalRecord, base_key
from ..turns import TURN_META_INFERENCE_ID, Turn
from ._usage import TURN_META_SESSION_USAGE, SessionUsage


class _Resumable(Protocol):
    """What :func:`prepare_go_on` uses of a :class:`~geppetto.Session` (a protocol: the session module imports
    this one)."""

    def _go_on_from(self, inference_id: str, records: list[JournalRecord], turn: Turn) -> None: ...


__all__ = ["carried_totals", "interrupted_in", "journal_records", "prepare_go_on", "seed_of"]


async def journal_records(store: Any, session_id: str) -> list[JournalRecord]:
    """The session's journal rows ([] when the store keeps no journal)."""
    read = getattr(store, "journal_read", None)
    return list(await read(session_id)) if read is not None else []


async def interrupted_in(store: Any, session_id: str, latest: Turn | None) -> str | None:
    """The inference whose journal the store holds and whose output is not ``latest`` (the store's latest
    snapshot): it stopped mid tool loop. None when there is none."""
    records = await journal_records(store, session_id)
    steps = [r for r in records if r.entry.startswith("step:")]
    if not steps:
        return None
    inference_id = max(steps, key=lambda r: r.at).inference_id
    if latest is not None and TURN_META_INFERENCE_ID.get(latest.metadata) == inference_id:
        return None  # it completed; only the journal's clearing was missed
    first = min((r for r in steps if r.inference_id == inference_id), key=lambda r: r.entry)
    if first.record.get("base") != base_key(latest):
        return None  # written against another snapshot: an inference abandoned before a later one
    return inference_id


def seed_of(turn: Turn) -> Turn:
    """``turn`` (rebuilt from an interrupted inference's journal) as the seed that inference goes on from:
    no longer marked as an inference's output (the inference stamps it again under the same id)."""
    TURN_META_INFERENCE_ID.delete(turn.metadata)
    return turn


def carried_totals(turn: Turn, totals: SessionUsage) -> SessionUsage | None:
    """The usage totals ``turn`` carries when they count more requests than ``totals`` (the requests the
    stopped process made count); None when they do not."""
    carried = TURN_META_SESSION_USAGE.get(turn.metadata)
    if carried is None:
        return None
    usage = SessionUsage.from_dict(carried)
    return usage if usage.requests > totals.requests else None


def prepare_go_on(session: _Resumable, inference_id: str, records: list[JournalRecord], turn: Turn) -> None:
    """Make ``turn`` (rebuilt from ``records``) ``session``'s latest snapshot, for ``inference_id`` to go on
    from; the caller starts the inference under that id. The server's entry to the first half of
    :meth:`Session.resume <geppetto.Session.resume>` for an interrupted inference."""
    session._go_on_from(inference_id, records, turn)
