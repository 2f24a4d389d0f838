"""The inferences a server worker runs: one per session across every worker (the store's lease), events
published to the bus in order, the outcome recorded, a cancel heard from any worker.

:class:`Runner` starts, runs and cancels inferences and follows the control topic; it owns a
:class:`~geppetto.server._sweep.Sweeper`, which settles the inferences whose worker died. What an inference
running here is (and how one a stopped worker left is prepared) is in ``_inference``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._exceptions import InferenceCancelled, StoreError, UsageError, UsageLimitExceeded
from .._terms import for_http
from ..engine import Engine
from ..events import Event
from ..events.bus import EventBus
from ..middleware import Middleware, system_prompt
from ..providers import BACKGROUND_OBSERVER
from ..runtime import recording_engine
from ..session import Session, UsageLimits, prepare_resume
from ..session.stores import SessionLease, SQLTurnStore
from ..tools import MARKS_PUBLISHED, ToolDefinition, ToolRegistry, published_entry
from ..turns import TURN_META_INFERENCE_ID, Turn, dumps_json, new_id, turn_to_dict
from ._background import Created, Follow, Published
from ._client_tools import SessionTools
from ._durable import DurableRuns
from ._inference import (
    HANDED_OVER,
    HOT_SESSIONS,
    RUN_FINISHED,
    RUN_STARTED,
    SWEEP_INTERVAL,
    NotFound,
    _Hot,
    _Running,
    picked_up,
    worker_name,
)
from ._metrics import server_metrics
from ._publish import Publisher
from ._sweep import Sweeper

__all__ = [
    "CONTROL_TOPIC",
    "HOT_SESSIONS",
    "RUN_FINISHED",
    "RUN_STARTED",
    "SWEEP_INTERVAL",
    "Busy",
    "NotFound",
    "Runner",
    "Started",
    "worker_name",
]

log = logging.getLogger("geppetto.server")

CANCEL_REQUESTED = "cancel_requested"
CONTROL_TOPIC = "geppetto-control"
"""The bus topic every worker listens on for cancels of inferences another worker runs."""

_LISTEN_FIRST_DELAY, _LISTEN_MAX_DELAY = 0.5, 10.0
"""Seconds before following the control topic again after it failed: doubling from the first to the most."""


class Busy(RuntimeError):
    """The session is running an inference (in this worker or another)."""


@dataclass(frozen=True)
class Started:
    """An inference a worker began: read its events with ``subscribe(session_id, after)``."""

    session_id: str
    inference_id: str
    after: str


def _refuse_over_limit(session: Session) -> None:
    """:class:`~geppetto.UsageLimitExceeded` in the client's terms when the session's stored totals already
    reach a limit of the server's (``--limits``): the prompt is refused before anything starts."""
    reached = session._meter.reached()
    if reached is None:
        return
    raise UsageLimitExceeded(
        f"usage limit {reached.limit}={reached.maximum:g} of this server is reached in session {session.session_id} "
        f"({reached.value:g} used), so the prompt was not run and nothing was sent to the provider; start a new "
        "session (POST /api/sessions), or restart the server with a higher limit "
        f"(geppetto serve --limits {reached.limit}=...)",
        limit=reached.limit,
        value=reached.value,
        maximum=reached.maximum,
        usage=reached.usage,
    )


class Runner:
    """Starts, runs and cancels inferences for the sessions in ``store``; events go to ``bus``.

    ``engine_for(settings)`` gives the engine for a session's settings (model, mode); ``tools`` are offered
    to every session; a session's ``system`` setting becomes a system prompt middleware.

    Every ``sweep_interval`` seconds (0: never) a worker runs ``sweep()``: it cancels its inferences whose
    lease it lost and settles inferences left ``running`` by a worker that is gone."""

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
        self.profile_name = ""  # shown by GET /api/info
        self.engine_record: dict[str, Any] = {}
        """The profile the sessions run on, recorded on each answer so ``geppetto chat --continue`` resumes a
        served session on it (empty when the caller gave the engines)."""
        self.worker = worker_name()
        self.durable: DurableRuns | None = None
        """Set by ``geppetto serve --temporal``: prompts run as durable sessions (``server._durable``)."""
        self._running: dict[str, _Running] = {}
        self._hot: dict[str, _Hot] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._control: asyncio.Task[None] | None = None
        self.publisher = Publisher(bus)  # a session's events, in order, retried while the broker is away
        self._sweeper = Sweeper(
            store,
            self.publisher,
            self._running,
            sweep_interval=sweep_interval,
            settings=self.settings,
            cancel_here=self._cancel_here,
            run=self._run,
            spawn=self._spawn,
        )

    @property
    def sweep_interval(self) -> float:
        """Seconds between two sweeps of this worker (0: none)."""
        return self._sweeper.sweep_interval

    async def sweep(self) -> None:
        """One sweep: record the ends the store refused earlier, cancel the inferences of this worker
        whose lease is gone, and settle inferences recorded ``running`` whose session nobody holds (its
        sweeper's)."""
        await self._sweeper.sweep()

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

    # -- life ---------------------------------------------------------------------------------
    async def start_listening(self) -> None:
        """Follow the control topic (cancels sent to any worker) from now on. A broker that does not answer
        yet is tried again with backoff: the worker starts anyway."""
        after: str | None
        try:
            after = await self.bus.last_id(CONTROL_TOPIC)
        except Exception:  # logged and counted by the listener, which asks again
            after = None
        self._control = asyncio.get_running_loop().create_task(self._listen(after))
        self._sweeper.start()

    async def _listen(self, after: str | None) -> None:
        delay, failed = _LISTEN_FIRST_DELAY, False
        while True:
            try:
                if after is None:
                    after = await self.bus.last_id(CONTROL_TOPIC)
                if failed:
                    log.warning("the control topic of the event bus is followed again")
                    delay, failed = _LISTEN_FIRST_DELAY, False
                async for event in self.bus.subscribe(CONTROL_TOPIC, after):
                    after = event.id
                    if event.data.get("type") == CANCEL_REQUESTED:
                        self._cancel_here(str(event.data.get("session_id")), str(event.data.get("inference_id")))
            except Exception as exc:  # the broker went away: try again, from where we were, with backoff
                server_metrics.count("control_failures", self.bus.url.partition(":")[0])
                log.log(
                    logging.DEBUG if failed else logging.WARNING,
                    "the control topic of the event bus failed (%s); cancels from other workers wait until it "
                    "is followed again (next try in %.1f s)",
                    exc,
                    delay,
                )
                failed = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, _LISTEN_MAX_DELAY)

    async def close(self, grace: float = 30.0) -> None:
        """Let running inferences finish (up to ``grace`` seconds, then cancel them), stop listening."""
        # the inferences first, then the publisher: what they published until the end is still sent
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        await self.publisher.close(grace)
        if self._control is not None:
            self._control.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._control
        await self._sweeper.stop()

    # -- sessions -----------------------------------------------------------------------------
    async def ensure_session(self, session_id: str) -> dict[str, Any]:
        """The settings of ``session_id``, made with the server's defaults when it does not exist yet."""
        found = await self.store.session_settings(session_id)
        if found is not None:
            return found
        with contextlib.suppress(UsageError):  # another request made it meanwhile
            await self.store.create_session(session_id, {})
        return await self.settings(session_id)

    # -- inferences ---------------------------------------------------------------------------
    async def start(
        self,
        session_id: str,
        text: str,
        *,
        seed: Turn | None = None,
        settings: dict[str, Any] | None = None,
        decisions: Mapping[str, Any] | None = None,
        client_tools: Sequence[ToolDefinition] | None = None,
        files: list[dict[str, Any]] | None = None,
    ) -> Started:
        """Begin an inference of ``text`` (with ``files`` attached) in ``session_id``; :class:`Busy` while one
        runs in any worker.

        ``seed``, for a session with no snapshot yet, is saved first as its history (a front-end that
        holds earlier messages). ``settings``: the session's, when the caller has just read them.
        ``decisions`` (call id -> decision, see :meth:`Session.resume <geppetto.Session.resume>`) resumes
        the tool calls that wait instead of prompting (``text`` is then only recorded). A prompt to a session
        with waiting calls, or decisions it cannot take, raise :class:`~geppetto.UsageError` before anything
        starts. ``client_tools``: the tools the front-end runs itself, offered from this run on (None: those
        it declared before, if this worker holds the session)."""
        if settings is None:
            settings = await self.settings(session_id)
        lease = await self._lease(session_id)
        try:
            if seed is not None and not await self.store.latest_seq(session_id):
                await self.store.save_snapshot(session_id, seed)
            durable = self.durable is not None
            session = (
                None if durable else await self._prepared(session_id, text, settings, decisions, client_tools, files)
            )
            inference_id = new_id()
            # read before run_started is published: a client that follows the events from ``after`` misses
            # nothing of this run
            after = await self.bus.last_id(session_id)
            await self.store.begin_inference(session_id, inference_id, worker=self.worker, prompt=text)
            running = self._running[session_id] = _Running(inference_id, lease=lease)
            await self.publisher.publish(
                session_id,
                {"type": RUN_STARTED, "session_id": session_id, "inference_id": inference_id, "prompt": text},
            )
        except BaseException:
            self._running.pop(session_id, None)
            await lease.release()
            raise
        if session is None:
            self._spawn(self._run_durable(session_id, text, settings, running, lease, decisions, files))
        else:
            self._spawn(self._run(session_id, text, settings, running, lease, session))
        return Started(session_id, inference_id, after)

    async def _try_lock(self, session_id: str, advice: str) -> SessionLease:
        """The session's lease; :class:`Busy`, with ``advice``, while an inference holds it."""
        lease = await self.store.try_lock(session_id)
        if lease is None:
            raise Busy(f"session {session_id} is running an inference; {advice}")
        return lease

    async def _lease(self, session_id: str) -> SessionLease:
        """The session's lease, after settling the inferences a dead worker left; :class:`Busy` when another
        request holds it, or when it went with an inference this worker picked up."""
        lease = await self._try_lock(
            session_id, f"wait for its {RUN_FINISHED} event or POST /api/sessions/{session_id}/cancel"
        )
        try:
            picked = await self._sweeper.settle_stale(session_id, lease)
        except BaseException:
            await lease.release()
            raise
        if picked is not None:  # the lease went with the inference this worker now finishes
            raise Busy(
                f"session {session_id} is finishing inference {picked}, which a worker that stopped was running "
                f"(its background response goes on); wait for its {RUN_FINISHED} event or "
                f"POST /api/sessions/{session_id}/cancel"
            )
        return lease

    async def _prepared(
        self,
        session_id: str,
        text: str,
        settings: dict[str, Any],
        decisions: Mapping[str, Any] | None,
        client_tools: Sequence[ToolDefinition] | None,
        files: list[dict[str, Any]] | None,
    ) -> Session:
        """The session, prompted with ``text`` or carrying ``decisions``; a UsageError leaves it kept hot."""
        session = await self._session(session_id, settings, lambda event: None)
        if client_tools is not None and isinstance(session.tools, SessionTools):
            session.tools.declare(client_tools)
        try:
            if decisions is None:
                _refuse_over_limit(session)
                session.prompt(text, files=files)
            else:
                prepare_resume(session, decisions)
        except (UsageError, UsageLimitExceeded):
            await self._keep_hot(session_id, settings, session)  # unchanged: still good for the next request
            raise
        return session

    async def cancel(self, session_id: str) -> str:
        """Ask the running inference of ``session_id`` to stop, wherever it runs; its id (a
        :class:`~geppetto.UsageError`, a 409, when none runs: the session is there, its state is what
        refuses)."""
        await self.settings(session_id)
        running = await self.store.inferences(session_id, status="running")
        if not running:
            raise UsageError(f"session {session_id} is not running an inference; nothing to cancel")
        inference_id = running[-1].inference_id
        if not self._cancel_here(session_id, inference_id):
            await self.bus.publish(
                CONTROL_TOPIC, {"type": CANCEL_REQUESTED, "session_id": session_id, "inference_id": inference_id}
            )
        return inference_id

    # -- running one inference --------------------------------------------------------------
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
                await picked_up(session, text, running, published)
            else:  # prepared by start(): prompted, or carrying the decisions it resumes with
                session.sinks = (sink,)
            BACKGROUND_OBSERVER.set(follow)  # the inference's task starts with this context
            MARKS_PUBLISHED.set(False)  # a result's event is marked published once the bus has it (the pump)
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

    async def _run_durable(
        self,
        session_id: str,
        text: str,
        settings: dict[str, Any],
        running: _Running,
        lease: SessionLease,
        decisions: Mapping[str, Any] | None,
        files: list[dict[str, Any]] | None,
    ) -> None:
        """One inference as an update to the session's Temporal workflow (``geppetto serve --temporal``): its
        activities publish the events and save the snapshots; this worker records its start and end."""
        assert self.durable is not None
        status, error, turn_id = "failed", None, None
        nothing: asyncio.Task[None] = asyncio.get_running_loop().create_task(asyncio.sleep(0))
        try:
            out = await self.durable.run(session_id, settings, text, files, decisions, running.inference_id)
            status, turn_id = "completed", out.id
        except InferenceCancelled:
            status, error = "cancelled", running.reason or "cancelled by a request"
        except asyncio.CancelledError:
            status, error = "cancelled", "the server shut down (the durable session goes on in Temporal)"
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {for_http(str(exc), session_id)}"
            log.warning("durable inference %s of session %s failed: %s", running.inference_id, session_id, error)
        finally:
            await asyncio.shield(self._finish(session_id, running, lease, nothing, status, error, turn_id))

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
            call_id = str(data.get("call_id") or "") if data.get("type") == "tool_result" else ""
            if call_id:  # one key wherever it is published: a pickup's copy is not appended again
                key = f"{running.inference_id}:tool_result:{call_id}"
            if await self.publisher.publish(session_id, data, key=key) is not None and call_id:
                await self._mark_published(session_id, running.inference_id, call_id)
            await published.published(cursor)

    async def _mark_published(self, session_id: str, inference_id: str, call_id: str) -> None:
        """The bus took the ``tool_result`` event of ``call_id``: marked in the journal, so a worker that picks
        the inference up does not publish it again (one it publishes anyway has the same key: not appended)."""
        try:
            await self.store.journal_write(session_id, inference_id, published_entry(call_id), {"at": time.time()})
        except Exception as exc:  # the bus's key still keeps a second copy out when it is the newest event
            log.warning("could not mark the result of tool call %s published (%s)", call_id, exc)

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
                self._sweeper.record_later(session_id, running.inference_id, status, error)
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
        # a session kept hot is good only while nothing newer was saved and its settings (its engine) stand
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
        elif self.durable is not None:  # the session's workflow cancels the activity that runs
            self._spawn(self._cancel_durable(session_id, inference_id))
        return True

    async def _cancel_durable(self, session_id: str, inference_id: str) -> None:
        assert self.durable is not None
        try:
            await self.durable.cancel(session_id, await self.settings(session_id), inference_id)
        except Exception:  # the run goes on; the client may cancel again
            log.exception("could not cancel durable inference %s of session %s", inference_id, session_id)

    def running_here(self, session_id: str) -> str | None:
        running = self._running.get(session_id)
        return running.inference_id if running is not None else None
