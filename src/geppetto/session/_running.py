"""Running one inference of a session: the Turn it runs on, the context the engine runs in, the output it
gives, and saving it.

These are functions of explicit values (a Turn, the engine, the store): :class:`~geppetto.Session` calls them
and makes every change to its own state (its history, its journal bookkeeping, what it knows the store holds).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, cast

from .._exceptions import StoreError, UsageLimitExceeded
from ..engine import Engine
from ..events import EventSink, with_sinks
from ..pricing import PriceTable, use_prices
from ..tools import APPROVAL, JOURNAL, JournalRecord, JournalStore, RunJournal, pending_tool_calls, using_deps
from ..turns import (
    PAYLOAD_ID,
    TURN_META_HISTORY_EDIT,
    TURN_META_INFERENCE_ID,
    TURN_META_SESSION_ID,
    Block,
    Frozen,
    Turn,
    TurnData,
    TurnMetadata,
    copy_json,
    new_id,
)
from ._history import _derive, _unproven
from ._stamp import stamp_inference
from ._store import EventLogStore, TimedEvent, TurnStore
from ._usage import TURN_META_INFERENCE_USAGE, TURN_META_SESSION_USAGE, TURN_META_STOPPED_BY_LIMIT, SessionUsage

__all__ = [
    "RUN_HOOKS",
    "engine_provider",
    "finished",
    "keeps_journal",
    "open_journal",
    "own_blocks",
    "running",
    "save",
    "save_failed_events",
    "stopped",
    "turn_id_for",
    "working_turn",
]

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


def turn_id_for(seed: Turn, ran: Collection[str], session_id: str) -> str:
    """The id the inference runs as: the seed's (a seed and its output share it), unless an inference
    already used it (``ran``: a second run with no new prompt, ``append(latest.clone())``, a restored latest,
    a Turn given twice): then a fresh one, so every inference has its own ``Turn.id``."""
    if seed.id and seed.id not in ran and not TURN_META_INFERENCE_ID.has(seed.metadata):
        return seed.id
    fresh = new_id()
    log.debug(
        "session %s: turn %s was already run by an inference; this one runs as turn %s", session_id, seed.id, fresh
    )
    return fresh


def own_blocks(seed: Turn, known: Collection[str]) -> list[int]:
    """The positions of the seed's own new blocks: stamped with its id, and held by no earlier snapshot
    (``known``: their ids). Read before the seed is settled, which makes its blocks known."""
    return [i for i, b in enumerate(seed.blocks) if b.turn_id == seed.id and b.id not in known]


def working_turn(
    seed: Turn, frozen: Frozen, turn_id: str, moved: Sequence[int], *, session_id: str, inference_id: str
) -> Turn:
    """The Turn an inference runs on: a copy of ``seed`` (the latest snapshot, settled as ``frozen``) under the
    id it runs as, with the session's and the inference's ids on it. When that id is a fresh one, the seed's
    own new blocks (``moved``) move to it."""
    work = _derive(seed, frozen, turn_id)
    if turn_id != seed.id:
        for i in moved:
            work.blocks[i].turn_id = turn_id
    # Ids go on the working turn before the engine runs, so every event carries them.
    TURN_META_SESSION_ID.set(work.metadata, session_id)
    TURN_META_INFERENCE_ID.set(work.metadata, inference_id)
    # the mark describes the snapshot an edit made; the inference's output is not an edit
    TURN_META_HISTORY_EDIT.delete(work.metadata)
    return work


@contextlib.contextmanager
def running(
    work: Turn,
    engine: Engine,
    *,
    sinks: Sequence[EventSink],
    prices: PriceTable | None,
    deps: Any,
    journal: RunJournal | None,
) -> Iterator[None]:
    """The context an inference on ``work`` runs in: its sinks, prices, the tools' deps, the run hooks
    (an exception of the inference passes through them) and its journal."""
    with with_sinks(*sinks), use_prices(prices), using_deps(deps), contextlib.ExitStack() as hooks:
        for hook in RUN_HOOKS:
            hooks.enter_context(hook(work, engine_provider(engine)))
        # this task's context only: the inference's tool calls are journaled
        JOURNAL.set(journal)
        yield


def finished(
    out: Turn,
    work: Turn,
    *,
    used: SessionUsage | None,
    totals: SessionUsage,
    session_id: str,
    inference_id: str,
    prior: set[str],
    origin: Frozen | None,
) -> Turn:
    """The engine's output ``out`` as the inference's: under ``work``'s id, with what it ``used`` and the
    session's ``totals`` (when a request reported usage: ``used`` not None), provenance stamped (``origin``:
    what ``work``'s blocks were derived from when the engine started, None when they were not)."""
    if out.id != work.id:  # an engine that built a new turn still answers for this one
        out.id = work.id
    if used is not None:
        TURN_META_INFERENCE_USAGE.set(out.metadata, used.to_dict())
        TURN_META_SESSION_USAGE.set(out.metadata, totals.to_dict())
    stamp_inference(out, session_id=session_id, inference_id=inference_id, prior_ids=prior, only=_unproven(out, origin))
    return out


def stopped(
    exc: UsageLimitExceeded, work: Turn, *, used: SessionUsage, session_id: str, inference_id: str, prior: set[str]
) -> Turn | None:
    """What to save when a usage limit stopped the inference after it made requests (``used``: its usage):
    the work done so far (``exc.turn``, copied) with the usage and the limit, so the session's totals are in
    the store and the next prompt is refused before any request. Calls that were asked for and not run are
    answered with the reason (the Turn stays one a provider takes). None when no request was made."""
    if not isinstance(exc.turn, Turn) or used.requests <= 0:
        return None
    out = exc.turn.clone()  # the caller's error.turn stays as it was
    out.id = work.id
    refused = f"not run: {exc.limit}={exc.maximum:g} was reached before this call could run"
    out.extend(
        Block.tool_use(str(b.payload.get(PAYLOAD_ID, "")), "", refused)
        for b in pending_tool_calls(out)
        # a call waiting for a person or the client keeps waiting: its answer comes with resume()
        if APPROVAL.get(b.metadata) is None
    )
    TURN_META_INFERENCE_USAGE.set(out.metadata, used.to_dict())
    TURN_META_STOPPED_BY_LIMIT.set(
        out.metadata, {"limit": exc.limit, "value": exc.value, "maximum": exc.maximum, "message": str(exc)}
    )
    stamp_inference(out, session_id=session_id, inference_id=inference_id, prior_ids=prior)
    return out


def keeps_journal(store: TurnStore | None) -> bool:
    """Whether ``store`` keeps a journal of running inferences."""
    return store is not None and hasattr(store, "journal_write")


async def open_journal(
    store: TurnStore,
    session_id: str,
    inference_id: str,
    *,
    base: Turn | None,
    records: Sequence[JournalRecord],
    abandoned: bool,
) -> RunJournal:
    """The journal of inference ``inference_id`` in ``store`` (one that :func:`keeps_journal`): going on from
    ``records`` (what a resume or a pickup read), else empty; with ``abandoned``, the rows an inference the
    session left behind are cleared first. ``base``: the latest snapshot the store holds."""
    journal_store = cast(JournalStore, store)
    if abandoned:
        with contextlib.suppress(Exception):
            await journal_store.journal_clear(session_id)
    return RunJournal(journal_store, session_id, inference_id, base=base, records=records)


async def save(store: TurnStore, session_id: str, out: Turn, frozen: Frozen, events: list[TimedEvent] | None) -> None:
    """Save ``out`` (settled as ``frozen``), with ``events`` when the session records them, as the latest
    snapshot of ``session_id``. A :class:`~geppetto.StoreError` says how to save it again."""
    if getattr(store, "reads_at_once", False):
        snapshot = out  # read whole before the store's first await: no caller can change it meanwhile
    else:
        snapshot = Turn(
            frozen.lazy(), out.id, TurnMetadata(copy_json(dict(out.metadata))), TurnData(copy_json(dict(out.data)))
        )
    try:
        if events is None:
            await store.save_snapshot(session_id, snapshot)
        else:
            assert isinstance(store, EventLogStore)
            await store.save_snapshot(session_id, snapshot, events=events)
    except StoreError as exc:
        raise StoreError(
            f"{exc} (the inference completed and its output is session.latest; save it again once the "
            "store works, e.g. with store.save_snapshot(session.session_id, session.latest))"
        ) from exc


async def save_failed_events(
    store: TurnStore | None, session_id: str, inference_id: str, events: list[TimedEvent] | None
) -> None:
    """Record the events of an inference that failed or was cancelled (logged when the store refuses)."""
    if not events or store is None:
        return
    assert isinstance(store, EventLogStore)
    try:
        await store.save_events(session_id, inference_id, events)
    except Exception:  # the inference's own error is the one to report
        log.exception("could not record the events of failed inference %s", inference_id)
