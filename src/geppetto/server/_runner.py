"""The inferences a server worker runs: one per session across every worker (the store's lease), events
published to the bus in order, the outcome recorded, a cancel heard from any worker."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._exceptions import InferenceCancelled, StoreError, UsageError
from ..engine import Engine
from ..events import Event
from ..events.bus import EventBus
from ..middleware import Middleware, system_prompt
from ..providers._background import BACKGROUND_OBSERVER, PENDING_RESPONSE
from ..session import ExecutionHandle, Session, UsageLimits
from ..session._approvals import prepare_resume
from ..session.stores import InferenceRecord, SessionLease, SQLTurnStore
from ..session.stores._background import BackgroundRecord
from ..tools import ToolDefinition, ToolRegistry
from ..turns import TURN_META_INFERENCE_ID, Turn, dumps_json, new_id, turn_to_dict
from ._background import Created, Follow, Published, pending_for, record_of
from ._client_tools import SessionTools
from ._metrics import server_metrics
from ._publish import Publisher

__all__ = ["CONTROL_TOPIC", "RUN_FINISHED", "RUN_STARTED", "Busy", "NotFound", "Runner", "Started"]

log = logging.getLogger("geppetto.server")

RUN_STARTED = "run_started"
RUN_FINISHED = "run_finished"
CANCEL_REQUESTED = "cancel_requested"
HANDED_OVER = "handed_over"
"""The end of an inference a stopping worker leaves running: its background response goes on server-side."""
CONTROL_TOPIC = "geppetto-control"
"""The bus topic every worker listens on for cancels of inferences another worker runs."""
SWEEP_INTERVAL = 10.0
"""Seconds between two sweeps of a worker (its lease check, stale inferences settled)."""

_LISTEN_FIRST_DELAY, _LISTEN_MAX_DELAY = 0.5, 10.0
"""Seconds before following the control topic again after it failed: doubling from the first to the most."""


class NotFound(LookupError):
    """No such session (the message says so and how to list them)."""


class Busy(RuntimeError):
    """The session is running an inference (in this worker or another)."""


@dataclass(frozen=True)
class Started:
    """An inference a worker began: read its events with ``subscribe(session_id, after)``."""

    session_id: str
    inference_id: str
    after: str


@dataclass
class _Running:
    inference_id: str
    handle: ExecutionHandle | None = None
    cancelled: bool = False
    reason: str | None = None  # why it was cancelled, when not by a request
    lease: SessionLease | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    resume: BackgroundRecord | None = None  # the background response a worker that died was reading


@dataclass
class _Hot:
    """A session this worker ran last: the store's snapshot number it holds, and the settings it was made with."""

    seq: int
    settings: dict[str, Any]
    session: Session


HOT_SESSIONS = 256
"""How many sessions a worker keeps in memory after their inference (the most recently run)."""


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Runner:
    """Starts, runs and cancels inferences for the sessions in ``store``; events go to ``bus``.

    ``engine_for(settings)`` gives the engine for a session's settings (model, mode); ``tools`` are offered
    to every session; a session's ``system`` setting becomes a system prompt middleware.

    Every ``sweep_interval`` seconds (0: never) a worker runs :meth:`sweep`: it cancels its inferences whose
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
        self.sweep_interval = sweep_interval
        self.profile_name = ""  # shown by GET /api/info
        self.worker = worker_name()
        self._running: dict[str, _Running] = {}
        self._hot: dict[str, _Hot] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._control: asyncio.Task[None] | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._stale_seen: dict[str, str] = {}  # session -> its running inference found without a lease
        self._unrecorded: dict[tuple[str, str], tuple[str, str | None]] = {}  # ends the store did not take
        self.publisher = Publisher(bus)  # a session's events, in order, retried while the broker is away

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
        if self.sweep_interval > 0:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_every())

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
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper

    # -- sessions -----------------------------------------------------------------------------
    async def settings(self, session_id: str) -> dict[str, Any]:
        settings = await self.store.session_settings(session_id)
        if settings is None:
            raise NotFound(f"no session {session_id!r}; list them with GET /api/sessions or make one with POST")
        return settings

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
        lease = await self.store.try_lock(session_id)
        if lease is None:
            raise Busy(
                f"session {session_id} is running an inference; wait for its {RUN_FINISHED} event or "
                f"POST /api/sessions/{session_id}/cancel"
            )
        try:
            picked = await self._settle_stale(session_id, lease)
        except BaseException:
            await lease.release()
            raise
        if picked is not None:  # the lease went with the inference this worker now finishes
            raise Busy(
                f"session {session_id} is finishing inference {picked}, which a worker that stopped was running "
                f"(its background response goes on); wait for its {RUN_FINISHED} event or "
                f"POST /api/sessions/{session_id}/cancel"
            )
        try:
            if seed is not None and not await self.store.latest_seq(session_id):
                await self.store.save_snapshot(session_id, seed)
            session = await self._session(session_id, settings, lambda event: None)
            if client_tools is not None and isinstance(session.tools, SessionTools):
                session.tools.declare(client_tools)
            try:
                if decisions is None:
                    session.prompt(text, files=files)
                else:
                    prepare_resume(session, decisions)
            except UsageError:
                await self._keep_hot(session_id, settings, session)  # unchanged: still good for the next request
                raise
            inference_id = new_id()
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
        task = asyncio.get_running_loop().create_task(self._run(session_id, text, settings, running, lease, session))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return Started(session_id, inference_id, after)

    async def _settle_stale(self, session_id: str, lease: SessionLease) -> str | None:
        """Inferences recorded as running while nobody holds the session's lease: their worker died. One that
        was reading a background response is picked up (holding ``lease``; its id is returned), the others
        are settled."""
        picked = None
        for record in await self.store.inferences(session_id, status="running"):
            if picked is None and await self._pick_up(record, lease):
                picked = record.inference_id
            else:
                await self._settle(record.session_id, record.inference_id, record.worker)
        return picked

    async def _settle(self, session_id: str, inference_id: str, worker: str | None) -> None:
        reason = f"the worker running it ({worker}) stopped before it ended"
        await self.store.end_inference(session_id, inference_id, "failed", reason)
        await self.publisher.publish(
            session_id,
            {
                "type": RUN_FINISHED,
                "session_id": session_id,
                "inference_id": inference_id,
                "status": "failed",
                "error": reason,
            },
        )

    # -- the sweep ------------------------------------------------------------------------------
    async def _sweep_every(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_interval)
            try:
                await self.sweep()
            except Exception:
                log.exception("the sweep of inferences failed; sweeping again in %g s", self.sweep_interval)

    async def sweep(self) -> None:
        """One sweep: record the ends the store refused earlier, cancel the inferences of this worker
        whose lease is gone, and settle inferences recorded ``running`` whose session nobody holds.

        A session found so on two sweeps in a row is settled (marked ``failed``, its ``run_finished``
        published): the first could be the moment between a database restart and the running worker
        taking its lease again."""
        for (session_id, inference_id), (status, error) in list(self._unrecorded.items()):
            await self.store.end_inference(session_id, inference_id, status, error)
            del self._unrecorded[session_id, inference_id]
        mine = {r.lease.key: r for r in self._running.values() if r.lease is not None}
        for lost in await self.store.lost_leases([r.lease for r in mine.values() if r.lease is not None]):
            self._cancel_here(
                lost.session_id,
                mine[lost.key].inference_id,
                reason="this worker lost the session's lease (its connection to the database dropped and "
                "another worker took the session), so it stopped the inference",
            )
        seen, self._stale_seen = self._stale_seen, {}
        for record in await self.store.running_inferences():
            if record.session_id in self._running:
                continue
            probe: SessionLease | None = await self.store.try_lock(record.session_id)
            if probe is None:  # its worker runs it
                continue
            try:
                if seen.get(record.session_id) != record.inference_id:
                    self._stale_seen[record.session_id] = record.inference_id
                elif await self._pick_up(record, probe):
                    probe = None  # the picked-up inference holds the session now
                else:
                    await self._settle(record.session_id, record.inference_id, record.worker)
            finally:
                if probe is not None:
                    await probe.release()

    async def _pick_up(self, record: InferenceRecord, lease: SessionLease) -> bool:
        """Go on with an inference whose worker died while it read a background response: from the Turn
        and the cursor that worker recorded (see ``_background``). False when it read none."""
        found = await record_of(self.store, record.session_id, record.inference_id)
        if found is None:
            return False
        settings = await self.settings(record.session_id)
        log.warning(
            "inference %s of session %s: its worker (%s) stopped while it read background response %s; "
            "picking it up after sequence number %d",
            record.inference_id,
            record.session_id,
            record.worker,
            found.response_id,
            found.cursor,
        )
        running = self._running[record.session_id] = _Running(record.inference_id, lease=lease, resume=found)
        task = asyncio.get_running_loop().create_task(
            self._run(record.session_id, record.prompt or "", settings, running, lease)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

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

        async def pump() -> None:
            skip_start = running.resume is not None  # the dead worker published the engine's start
            while (item := await queue.get()) is not None:
                if isinstance(item, Created):
                    await published.created(item)
                    continue
                data, key, cursor = item
                if skip_start and data.get("type") == "start":
                    skip_start = False
                    continue
                data["inference_id"] = running.inference_id
                await self.publisher.publish(session_id, data, key=key)
                await published.published(cursor)

        pumping = asyncio.get_running_loop().create_task(pump())
        status, error, turn_id = "failed", None, None
        unsaved: Turn | None = None
        try:
            if session is None:  # an inference picked up from a worker that stopped
                session = await self._session(session_id, settings, sink)
                if running.resume is None:
                    session.prompt(text)
                else:
                    await published.picked_up(running.resume)
                    session.append(running.resume.turn)
                    PENDING_RESPONSE.set(pending_for(running.resume))
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
            status, error = "failed", f"{type(exc).__name__}: {exc}"
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
        finally:
            queue.put_nowait(None)
            await asyncio.shield(
                self._finish(session_id, running, lease, pumping, status, error, turn_id, unsaved, published)
            )

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
        finished: dict[str, Any] = {
            "type": RUN_FINISHED,
            "session_id": session_id,
            "inference_id": running.inference_id,
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
                    log.exception("could not publish the unsaved output of inference %s", running.inference_id)
            await self.publisher.publish(session_id, finished)
        except Exception:
            log.exception("could not publish the end of inference %s", running.inference_id)

    async def _session(self, session_id: str, settings: dict[str, Any], sink: Callable[[Event], None]) -> Session:
        """The session, kept hot in this worker since its last inference here when the store holds nothing
        newer (another worker may have run it since); else restored from its latest snapshot alone."""
        seq = await self.store.latest_seq(session_id)
        hot = self._hot.pop(session_id, None)
        if hot is not None and hot.seq == seq and hot.settings == settings:
            hot.session.sinks = (sink,)
            return hot.session
        middlewares: list[Middleware] = []
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

    async def cancel(self, session_id: str) -> str:
        """Ask the running inference of ``session_id`` to stop, wherever it runs; its id (NotFound when
        no inference runs)."""
        await self.settings(session_id)
        running = await self.store.inferences(session_id, status="running")
        if not running:
            raise NotFound(f"session {session_id} is not running an inference; nothing to cancel")
        inference_id = running[-1].inference_id
        if not self._cancel_here(session_id, inference_id):
            await self.bus.publish(
                CONTROL_TOPIC, {"type": CANCEL_REQUESTED, "session_id": session_id, "inference_id": inference_id}
            )
        return inference_id

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
