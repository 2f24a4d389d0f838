"""Running one inference of a session: the engine call under its hooks, then saving its output."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from .._exceptions import StoreError
from ..engine import Engine
from ..events import EventInterrupt, EventSink, metadata_for, publish, with_sinks
from ..pricing import PriceTable, use_prices
from ..turns import Turn
from ..turns._cow import Frozen, LazyBlockList
from ..turns._keys import TurnData, TurnMetadata, copy_json
from ..turns._watch import BlockList
from ._history import _unproven
from ._stamp import stamp_inference
from ._store import EventLogStore, TimedEvent, TurnStore
from ._usage import TURN_META_INFERENCE_USAGE, TURN_META_SESSION_USAGE, UsageMeter


class Session(Protocol):
    """What running an inference uses of a :class:`~geppetto.Session` (a protocol: the session module
    imports this one)."""

    session_id: str
    store: TurnStore | None
    record_events: bool
    sinks: tuple[EventSink, ...]
    prices: PriceTable | None
    engine: Engine
    _meter: UsageMeter

    def _settle_latest(self) -> Frozen | None: ...
    def _push(self, turn: Turn) -> None: ...


__all__ = ["RUN_HOOKS", "complete", "engine_provider", "run", "save", "save_failed_events"]

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


async def run(session: Session, work: Turn, inference_id: str, prior: set[str]) -> Turn:
    origin = work.blocks.origin if isinstance(work.blocks, LazyBlockList) else None
    recorded: list[TimedEvent] | None = [] if session.record_events else None
    sinks = session.sinks if recorded is None else (*session.sinks, lambda e: recorded.append((time.time(), e)))
    start = session._meter.begin()
    with with_sinks(*sinks), use_prices(session.prices), contextlib.ExitStack() as hooks:
        for hook in RUN_HOOKS:
            hooks.enter_context(hook(work, engine_provider(session.engine)))
        try:
            out = await session.engine.run_inference(work)
        except asyncio.CancelledError:
            publish(EventInterrupt(metadata_for(work), reason="cancelled"))
            await save_failed_events(session, inference_id, recorded)
            raise
        except BaseException:
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
    return out


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


async def save(session: Session, out: Turn, frozen: Frozen, events: list[TimedEvent] | None) -> None:
    if session.store is None:
        return
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
