"""A session's side of the journal (``geppetto.tools._journal``): finding an inference that was cut off mid
tool loop when a session is restored, and going on with it (:meth:`Session.resume <geppetto.Session.resume>`)."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from .._exceptions import UsageError
from ..tools._journal import JournalRecord, base_key, rebuild
from ..turns import TURN_META_INFERENCE_ID, Turn
from ._usage import TURN_META_SESSION_USAGE, SessionUsage, UsageMeter

__all__ = ["go_on", "interrupted_in", "journal_records", "prepare_go_on"]

log = logging.getLogger("geppetto.session")


class _Handle(Protocol):
    async def wait(self) -> Turn: ...


class Session(Protocol):
    """What this module uses of a :class:`~geppetto.Session` (a protocol: the session module imports this one)."""

    session_id: str
    store: Any
    tools: Any
    _meter: UsageMeter
    _interrupted: str | None
    _journal_dirty: bool
    _resume_journal: tuple[str, list[JournalRecord]] | None

    @property
    def latest(self) -> Turn | None: ...
    def _check_idle(self, action: str) -> None: ...
    def _settle_latest(self) -> Any: ...
    def _push(self, turn: Turn) -> None: ...
    def start_inference(self, *, inference_id: str | None = None) -> _Handle: ...


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


def prepare_go_on(session: Session, inference_id: str, records: list[JournalRecord], turn: Turn) -> None:
    """Make ``turn`` (rebuilt from ``records``) the latest snapshot, for ``inference_id`` to go on from; the
    caller starts the inference under that id."""
    TURN_META_INFERENCE_ID.delete(turn.metadata)  # a seed; the inference stamps it again under the same id
    totals = TURN_META_SESSION_USAGE.get(turn.metadata)
    if totals is not None and SessionUsage.from_dict(totals).requests > session._meter.totals.requests:
        session._meter.totals = SessionUsage.from_dict(totals)  # the requests the stopped process made count
    log.info("session %s: going on with interrupted inference %s from its journal", session.session_id, inference_id)
    session._settle_latest()
    session._push(turn)
    session._resume_journal = (inference_id, records)
    session._interrupted = None
    session._journal_dirty = False  # the journal is this inference's own again


async def go_on(session: Session) -> Turn:
    """Go on with the session's interrupted inference from its journal; returns its output turn."""
    session._check_idle("resume")
    inference_id = session._interrupted
    assert inference_id is not None
    if session.tools is None:
        raise UsageError(
            "this session has no tools to go on with its interrupted inference: restore it with the same tools, "
            "e.g. Session.restore(engine, store, session_id, tools=[...])"
        )
    records = await journal_records(session.store, session.session_id)
    turn = rebuild(records, inference_id, session.latest)
    if turn is None:
        session._interrupted = None
        raise UsageError(
            f"inference {inference_id} of session {session.session_id} cannot be resumed: the store's journal "
            "no longer rebuilds its Turn; start the next turn with session.prompt(text)"
        )
    prepare_go_on(session, inference_id, records, turn)
    return await session.start_inference(inference_id=inference_id).wait()
