"""How a server worker runs one inference of a session: the session made or kept hot, its events pumped to
the bus in order, its outcome recorded and published as ``run_finished``. :class:`~geppetto.server._runner.Runner`
builds on this (the sweep in ``_sweep``, starting and cancelling in ``_runner``)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from .._exceptions import InferenceCancelled, StoreError
from .._terms import for_http
from ..engine import Engine
from ..events import Event
from ..events.bus import EventBus
from ..middleware import Middleware, system_prompt
from ..providers._background import BACKGROUND_OBSERVER, PENDING_RESPONSE
from ..runtime import recording_engine
from ..session import ExecutionHandle, Session, UsageLimits
from ..session._journal import prepare_go_on
from ..session.stores import SessionLease, SQLTurnStore
from ..session.stores._background import BackgroundRecord
from ..tools import ToolRegistry
from ..tools._journal import JournalRecord, rebuild
from ..turns import TURN_META_INFERENCE_ID, Turn, dumps_json, turn_to_dict
from ._background import Created, Follow, Published, pending_for
from ._client_tools import SessionTools
from ._metrics import server_metrics
from ._publish import Publisher

__all__ = ["HANDED_OVER", "RUN_FINISHED", "RUN_STARTED", "SWEEP_INTERVAL", "InferenceRunner", "NotFound"]

log = logging.getLogger("geppetto.server")

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


class InferenceRunner:
    """Runs inferences for the sessions in ``store``; events go to ``bus``.

    ``engine_for(settings)`` gives the engine for a session's settings (model, mode); ``tools`` are offered
    to every session; a session's ``system`` setting becomes a system prompt middleware."""

    def __init__(
        self,
        store: SQLTurnStore,
        bus: EventBus,
        engine_for: Callable[[dict[str, Any]], Engine],
        tools: ToolRegistry | None = None,
        *,
        sweep_interval: float = SWEEP_INTERVAL,
        limits: UsageLimits | None = None,
    ) -> None:
        self.store, self.bus, self.engine_for, self.tools = store, bus, engine_for, tools
        self.limits = limits
        """The usage limits of every session this worker runs (``geppetto serve --limits``; counted per session,
        its stored totals included)."""
        self.sweep_interval = sweep_interval
        self.profile_name = ""  # shown by GET /api/info
        self.engine_record: dict[str, Any] = {}
        """The profile the sessions run on, recorded on each answer so ``geppetto chat --continue`` resumes a
        served session on it (empty when the caller gave the engines)."""
        self.worker = worker_name()
        self._running: dict[str, _Running] = {}
        self._hot: dict[str, _Hot] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._control: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._stale_seen: dict[str, str] = {}  # session -> its running inference found without a lease
        self._unrecorded: dict[tuple[str, str], tuple[str, str | None]] = {}  # ends the store did not take
        self.publisher = Publisher(bus)  # a session's events, in order, retried while the broker is away

    async def settings(self, session_id: str) -> dict[str, Any]:
        settings = await self.store.session_settings(session_id)
        if settings is None:
            raise NotFound(f"no session {session_id!r}; list them with GET /api/sessions or make one with POST")
        return settings

    def _spawn(self, run: Coroutine[Any, Any, None]) -> None:
        """Run ``run`` in a task :meth:`close` waits for."""
        task = asyncio.get_running_loop().create_task(run)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(
        self,
        session_id: str,
        text: str,
        settings: dict[str, Any],
        running: _Running,
        lease: SessionLease,
        session: Session | None = None,
    ) -> None:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        follow = Follow(queue, running.inference_id, lambda: running.cancelled and running.reason is None)
        published = Published(self.store, session_id, running.inference_id)

        def sink(event: Event) -> None:
            queue.put_nowait((event.to_dict(), *follow.key()))

        pumping = asyncio.get_running_loop().create_task(self._pump(session_id, running, queue, published))
        status, error, turn_id = "failed", None, None
        unsaved: Turn | None = None
        try:
            if session is None:  # an inference picked up from a worker that stopped
                session = await self._session(session_id, settings, sink)
                await self._picked_up(session, text, running, published)
            else:  # prepared by start(): prompted, or carrying the decisions it resumes with
                session.sinks = (sink,)
            BACKGROUND_OBSERVER.set(follow)  # the inference's task starts with this context
            running.handle = session.start_inference(inference_id=running.inference_id)
            if running.cancelled:
                running.handle.cancel()
            out = await running.handle.wait()
            status, turn_id = "completed", out.id
            await self._keep_hot(session_id, settings, session)
        except InferenceCancelled:
            status, error = "cancelled", running.reason or "cancelled by a request"
        except asyncio.CancelledError:
            status, error = "cancelled", "the server shut down"
            if published.response_id and not running.cancelled:
                status = HANDED_OVER  # its background response goes on: another worker picks the inference up
            raise
        except Exception as exc:
            status = "failed"
            error, unsaved = self._failure(session_id, running, session, exc)
        finally:
            queue.put_nowait(None)
            await asyncio.shield(
                self._finish(session_id, running, lease, pumping, status, error, turn_id, unsaved, published)
            )

    async def _pump(self, session_id: str, running: _Running, queue: asyncio.Queue[Any], published: Published) -> None:
        """Publish the inference's events from ``queue`` in order (None ends), noting how far they went."""
        skip_start = True  # when the response a dead worker was reading is read on: it published its start
        while (item := await queue.get()) is not None:
            if isinstance(item, Created):
                await published.created(item)
                continue
            data, key, cursor = item
            if skip_start and running.resume is not None and data.get("type") == "start":
                skip_start = False
                continue
            data["inference_id"] = running.inference_id
            await self.publisher.publish(session_id, data, key=key)
            await published.published(cursor)

    @staticmethod
    async def _picked_up(session: Session, text: str, running: _Running, published: Published) -> None:
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

    def _failure(
        self, session_id: str, running: _Running, session: Session | None, exc: Exception
    ) -> tuple[str, Turn | None]:
        """The error an inference that raised ``exc`` ends with, and its output when the engine answered but
        the store refused the snapshot (logged in full)."""
        error = f"{type(exc).__name__}: {for_http(str(exc), session_id)}"
        unsaved: Turn | None = None
        latest = session.latest if session is not None else None
        if (
            isinstance(exc, StoreError)
            and latest
            and TURN_META_INFERENCE_ID.get(latest.metadata) == running.inference_id
        ):
            unsaved = latest  # the engine answered; the store refused the snapshot
            error = (
                f"the answer could not be saved: {exc.__cause__ or exc}; the worker's log holds it "
                f"(inference {running.inference_id})"
            )
            log.error(
                "inference %s of session %s completed but its output could not be saved (%s); the output turn: %s",
                running.inference_id,
                session_id,
                exc.__cause__ or exc,
                dumps_json(latest),
            )
        else:
            log.warning("inference %s of session %s failed: %s", running.inference_id, session_id, error)
        server_metrics.count("inferences_failed", type(exc).__name__)
        return error, unsaved

    async def _finish(
        self,
        session_id: str,
        running: _Running,
        lease: SessionLease,
        pumping: asyncio.Task[None],
        status: str,
        error: str | None,
        turn_id: str | None,
        unsaved: Turn | None = None,
        published: Published | None = None,
    ) -> None:
        try:
            await pumping
            if status == HANDED_OVER:
                log.warning(
                    "inference %s of session %s left running as this worker stops: its background response goes "
                    "on, and another worker's sweep picks the inference up",
                    running.inference_id,
                    session_id,
                )
                return
            if published is not None:
                await published.forget()
            try:
                await self.store.end_inference(session_id, running.inference_id, status, error)
            except Exception:  # readers still get run_finished; the next sweep records the end
                log.exception("could not record the end of inference %s; the next sweep will", running.inference_id)
                self._unrecorded[session_id, running.inference_id] = (status, error)
        finally:
            if self._running.get(session_id) is running:
                del self._running[session_id]
            running.done.set()
            await lease.release()
        # The session is free before its readers hear that the run finished, so a client that prompts again
        # on run_finished (on any worker) is never told the session is busy.
        await self._publish_finished(session_id, running.inference_id, status, error, turn_id, unsaved)

    async def _publish_finished(
        self,
        session_id: str,
        inference_id: str,
        status: str,
        error: str | None,
        turn_id: str | None,
        unsaved: Turn | None,
    ) -> None:
        finished: dict[str, Any] = {
            "type": RUN_FINISHED,
            "session_id": session_id,
            "inference_id": inference_id,
            "status": status,
        }
        if error is not None:
            finished["error"] = error
        if turn_id is not None:
            finished["turn_id"] = turn_id
        try:
            if unsaved is not None:
                try:
                    await self.publisher.publish(
                        session_id,
                        {**finished, "error": f"{error}, and so does the turn field", "turn": turn_to_dict(unsaved)},
                    )
                    return
                except Exception:  # too big for the bus, say: the error still says where the answer is
                    log.exception("could not publish the unsaved output of inference %s", inference_id)
            await self.publisher.publish(session_id, finished)
        except Exception:
            log.exception("could not publish the end of inference %s", inference_id)

    async def _session(self, session_id: str, settings: dict[str, Any], sink: Callable[[Event], None]) -> Session:
        """The session, kept hot in this worker since its last inference here when the store holds nothing
        newer (another worker may have run it since); else restored from its latest snapshot alone."""
        seq = await self.store.latest_seq(session_id)
        hot = self._hot.pop(session_id, None)
        if hot is not None and hot.seq == seq and hot.settings == settings:
            hot.session.sinks = (sink,)
            return hot.session
        middlewares: list[Middleware] = []
        if self.engine_record:
            ran_on = {**self.engine_record, **{k: settings[k] for k in ("model", "mode") if settings.get(k)}}
            middlewares.append(recording_engine(lambda: ran_on))
        if settings.get("system"):
            middlewares.append(system_prompt(str(settings["system"])))
        session = Session(
            self.engine_for(settings),
            tools=SessionTools(self.tools),
            middlewares=middlewares,
            store=self.store,
            session_id=session_id,
            sinks=[sink],
            record_events=True,
            limits=self.limits,
        )
        if seq:
            latest = await self.store.load_latest(session_id)
            if latest is not None:
                session.append(latest)
                session._stored = latest  # what the journal's first checkpoint need not write again
        return session

    async def _keep_hot(self, session_id: str, settings: dict[str, Any], session: Session) -> None:
        """Keep ``session`` for its next prompt: holding the lease, what it just saved is the store's latest
        (which the store remembers, so no query is needed)."""
        known = getattr(self.store, "known_seq", None)
        seq = known(session_id) if known is not None else None
        self._hot[session_id] = _Hot(
            seq if seq is not None else await self.store.latest_seq(session_id), settings, session
        )
        if len(self._hot) > HOT_SESSIONS:
            del self._hot[next(iter(self._hot))]

    def _cancel_here(self, session_id: str, inference_id: str, *, reason: str | None = None) -> bool:
        running = self._running.get(session_id)
        if running is None or running.inference_id != inference_id:
            return False
        running.cancelled = True
        running.reason = reason
        if running.handle is not None:
            running.handle.cancel()
        return True

    def running_here(self, session_id: str) -> str | None:
        running = self._running.get(session_id)
        return running.inference_id if running is not None else None
