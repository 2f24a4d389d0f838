"""Running one inference of a session: the engine call under its hooks, then saving its output."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

from .._exceptions import StoreError, UsageLimitExceeded
from ..engine import Engine
from ..events import EventInterrupt, EventSink, metadata_for, publish, with_sinks
from ..pricing import PriceTable, use_prices
from ..tools._approval import APPROVAL
from ..tools._context import using_deps
from ..tools._journal import JOURNAL, JournalRecord, JournalStore, RunJournal
from ..tools._pending import pending_tool_calls
from ..turns import PAYLOAD_ID, TURN_META_INFERENCE_ID, TURN_META_SESSION_ID, Block, Turn, new_id
from ..turns._cow import Frozen, LazyBlockList
from ..turns._keys import TurnData, TurnMetadata, copy_json
from ..turns._known import TURN_META_HISTORY_EDIT
from ..turns._watch import BlockList
from ._collector import settle
from ._history import _derive, _unproven
from ._stamp import stamp_inference
from ._store import EventLogStore, TimedEvent, TurnStore
from ._usage import (
    TURN_META_INFERENCE_USAGE,
    TURN_META_SESSION_USAGE,
    TURN_META_STOPPED_BY_LIMIT,
    SessionUsage,
    UsageMeter,
)


class Session(Protocol):
    """What running an inference uses of a :class:`~geppetto.Session` (a protocol: the session module
    imports this one)."""

    session_id: str
    store: TurnStore | None
    record_events: bool
    sinks: tuple[EventSink, ...]
    prices: PriceTable | None
    deps: Any
    engine: Engine
    _meter: UsageMeter

    _ran: set[str]
    _interrupted: str | None
    _journal_dirty: bool
    _resume_journal: tuple[str, list[JournalRecord]] | None
    _stored: Turn | None

    @property
    def _known(self) -> set[str]: ...

    def _settle_latest(self) -> Frozen | None: ...
    def _push(self, turn: Turn) -> None: ...


__all__ = ["RUN_HOOKS", "complete", "engine_provider", "run", "save", "save_failed_events", "working_turn"]

log = logging.getLogger("geppetto.session")

RunHook = Callable[[Turn, str], contextlib.AbstractContextManager[Any]]
RUN_HOOKS: list[RunHook] = []
"""Context managers entered around every inference a session runs (given the working turn and the
provider of the session's engine, "" when it names none), e.g. the OpenTelemetry span of a
``Session.run``; an exception of the inference passes through them."""


def engine_provider(engine: Any) -> str:
    """The provider an engine talks to (``openai``, ``anthropic``...), looking through middleware wrappers
    (their ``engine``); "" when none names one."""
    for _ in range(32):  # wrappers nest a few deep; a cycle must not hang
        provider = getattr(engine, "provider", None)
        if isinstance(provider, str) and provider:
            return provider
        engine = getattr(engine, "engine", None)
        if engine is None:
            break
    return ""


def working_turn(session: Session, seed: Turn, inference_id: str) -> Turn:
    """The Turn an inference runs on: a copy of ``seed`` (the latest snapshot) under the id it runs as, with
    the session's and the inference's ids on it."""
    turn_id = _turn_id_for(session, seed)
    # the seed's own new blocks, stamped with the id it can no longer run as, move to the fresh one
    moved = (
        []
        if turn_id == seed.id
        else [i for i, b in enumerate(seed.blocks) if b.turn_id == seed.id and b.id not in session._known]
    )
    frozen = session._settle_latest()
    assert frozen is not None
    work = _derive(seed, frozen, turn_id)
    for i in moved:
        work.blocks[i].turn_id = turn_id
    # Ids go on the working turn before the engine runs, so every event carries them.
    TURN_META_SESSION_ID.set(work.metadata, session.session_id)
    TURN_META_INFERENCE_ID.set(work.metadata, inference_id)
    TURN_META_HISTORY_EDIT.delete(work.metadata)
    return work


def _turn_id_for(session: Session, seed: Turn) -> str:
    """The id the inference runs as: the seed's (Policy A: seed and output share it), unless an inference
    already used it (a second run with no new prompt, ``append(latest.clone())``, a restored latest, a
    Turn given twice): then a fresh one, so every inference has its own ``Turn.id``."""
    if seed.id and seed.id not in session._ran and not TURN_META_INFERENCE_ID.has(seed.metadata):
        return seed.id
    fresh = new_id()
    log.debug(
        "session %s: turn %s was already run by an inference; this one runs as turn %s",
        session.session_id,
        seed.id,
        fresh,
    )
    return fresh


async def run(session: Session, work: Turn, inference_id: str, prior: set[str]) -> Turn:
    origin = work.blocks.origin if isinstance(work.blocks, LazyBlockList) else None
    recorded: list[TimedEvent] | None = [] if session.record_events else None
    sinks = session.sinks if recorded is None else (*session.sinks, lambda e: recorded.append((time.time(), e)))
    start = session._meter.begin()
    journal = await _journal_for(session, inference_id)
    with with_sinks(*sinks), use_prices(session.prices), using_deps(session.deps), contextlib.ExitStack() as hooks:
        for hook in RUN_HOOKS:
            hooks.enter_context(hook(work, engine_provider(session.engine)))
        JOURNAL.set(journal)  # this task's context only: the inference's tool calls are journaled
        try:
            out = await session.engine.run_inference(work)
        except asyncio.CancelledError:
            publish(EventInterrupt(metadata_for(work), reason="cancelled"))
            await save_failed_events(session, inference_id, recorded)
            raise
        except UsageLimitExceeded as exc:
            if not await _save_stopped(session, work, exc, inference_id, start, recorded):
                await save_failed_events(session, inference_id, recorded)
            raise
        except BaseException:
            if journal is not None and journal.wrote:
                session._interrupted = inference_id  # resume() goes on from its journal, tools not run again
                session._journal_dirty = True
            await save_failed_events(session, inference_id, recorded)
            raise
    if out.id != work.id:  # an engine that built a new turn still answers for this one
        out.id = work.id
    if session._meter.reported:
        TURN_META_INFERENCE_USAGE.set(out.metadata, (session._meter.totals - start).to_dict())
        TURN_META_SESSION_USAGE.set(out.metadata, session._meter.totals.to_dict())
    stamp_inference(
        out, session_id=session.session_id, inference_id=inference_id, prior_ids=prior, only=_unproven(out, origin)
    )
    await complete(session, out, recorded)
    if journal is not None and (journal.wrote or journal.resumed):
        await journal.clear()  # the snapshot holds what the tools returned
    return out


async def _save_stopped(
    session: Session,
    work: Turn,
    exc: UsageLimitExceeded,
    inference_id: str,
    start: SessionUsage,
    events: list[TimedEvent] | None,
) -> bool:
    """A usage limit stopped the inference after it made requests: save the work done so far (``exc.turn``)
    as a snapshot with the usage and the limit, so the session's totals are in the store and the next
    prompt is refused before any request. Calls that were asked for and not run are answered with the
    reason (the Turn stays one a provider takes). Whether it was saved (not when no request was made)."""
    if not isinstance(exc.turn, Turn) or session._meter.totals.requests <= start.requests:
        return False
    out = exc.turn.clone()  # the caller's error.turn stays as it was
    out.id = work.id
    refused = f"not run: {exc.limit}={exc.maximum:g} was reached before this call could run"
    out.extend(
        Block.tool_use(str(b.payload.get(PAYLOAD_ID, "")), "", refused)
        for b in pending_tool_calls(out)
        if APPROVAL.get(b.metadata) is None
    )
    TURN_META_INFERENCE_USAGE.set(out.metadata, (session._meter.totals - start).to_dict())
    TURN_META_STOPPED_BY_LIMIT.set(
        out.metadata, {"limit": exc.limit, "value": exc.value, "maximum": exc.maximum, "message": str(exc)}
    )
    stamp_inference(out, session_id=session.session_id, inference_id=inference_id, prior_ids=session._known)
    try:
        await complete(session, out, events)
    except StoreError:
        log.exception(
            "could not save the work inference %s did before usage limit %s stopped it", inference_id, exc.limit
        )
        return False
    return True


async def _journal_for(session: Session, inference_id: str) -> RunJournal | None:
    """The journal of this inference (None when the store keeps none): going on from the records a resume
    or a pickup read, else empty; the rows an abandoned inference left are cleared first."""
    store = session.store
    if store is None or not hasattr(store, "journal_write"):
        return None
    journal_store = cast(JournalStore, store)
    picked, session._resume_journal = session._resume_journal, None
    records = picked[1] if picked is not None and picked[0] == inference_id else ()
    if not records and session._journal_dirty:
        session._interrupted, session._journal_dirty = None, False  # a new inference: the interrupted one is abandoned
        with contextlib.suppress(Exception):
            await journal_store.journal_clear(session.session_id)
    return RunJournal(journal_store, session.session_id, inference_id, base=session._stored, records=records)


async def complete(session: Session, out: Turn, events: list[TimedEvent] | None) -> None:
    """Save ``out`` and add it to the history. Once the engine has answered, the inference completes:
    a cancel that arrives while the store is writing waits for the write and is then ignored, so the
    history, the store and the caller agree."""
    session._settle_latest()
    session._push(out)
    frozen = session._settle_latest()
    assert frozen is not None
    # The output's own list becomes one over the frozen versions it was just compared with, so the
    # next prompt and the store start from them (a reader's proof comes along: the blocks are equal).
    blocks = out.blocks
    out.blocks = frozen.lazy(blocks.held() if isinstance(blocks, BlockList) else None)
    saving = asyncio.ensure_future(save(session, out, frozen, events))
    try:
        await asyncio.shield(saving)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        await saving
    finally:
        settle()  # the history is long-lived: out of the collector's passes (session/_collector.py)


async def save(session: Session, out: Turn, frozen: Frozen, events: list[TimedEvent] | None) -> None:
    if session.store is None:
        return
    if session._meter.totals.requests:
        # the session's totals so far, on every snapshot it saves (an edit's too): restoring any latest
        # snapshot gives them back, so a limit holds across prompts, edits and processes
        TURN_META_SESSION_USAGE.set(out.metadata, session._meter.totals.to_dict())
    if getattr(session.store, "reads_at_once", False):
        snapshot = out  # read whole before the store's first await: no caller can change it meanwhile
    else:
        snapshot = Turn(
            frozen.lazy(), out.id, TurnMetadata(copy_json(dict(out.metadata))), TurnData(copy_json(dict(out.data)))
        )
    try:
        if events is None:
            await session.store.save_snapshot(session.session_id, snapshot)
        else:
            assert isinstance(session.store, EventLogStore)
            await session.store.save_snapshot(session.session_id, snapshot, events=events)
        session._stored = out
    except StoreError as exc:
        raise StoreError(
            f"{exc} (the inference completed and its output is session.latest; save it again once the "
            "store works, e.g. with store.save_snapshot(session.session_id, session.latest))"
        ) from exc


async def save_failed_events(session: Session, inference_id: str, events: list[TimedEvent] | None) -> None:
    if not events or session.store is None:
        return
    assert isinstance(session.store, EventLogStore)
    try:
        await session.store.save_events(session.session_id, inference_id, events)
    except Exception:  # the inference's own error is the one to report
        log.exception("could not record the events of failed inference %s", inference_id)
