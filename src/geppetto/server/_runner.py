"""The inferences a server worker runs: one per session across every worker (the store's lease), events
published to the bus in order, the outcome recorded, a cancel heard from any worker."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._exceptions import InferenceCancelled, UsageError
from ..engine import Engine
from ..events import Event
from ..events.bus import EventBus
from ..middleware import Middleware, system_prompt
from ..session import ExecutionHandle, Session
from ..session.stores import SessionLease, SQLTurnStore
from ..tools import ToolRegistry
from ..turns import Turn, new_id
from ._metrics import server_metrics
from ._publish import Publisher

__all__ = ["CONTROL_TOPIC", "RUN_FINISHED", "RUN_STARTED", "Busy", "NotFound", "Runner", "Started"]

log = logging.getLogger("geppetto.server")

RUN_STARTED = "run_started"
RUN_FINISHED = "run_finished"
CANCEL_REQUESTED = "cancel_requested"
CONTROL_TOPIC = "geppetto-control"
"""The bus topic every worker listens on for cancels of inferences another worker runs."""
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
    done: asyncio.Event = field(default_factory=asyncio.Event)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Runner:
    """Starts, runs and cancels inferences for the sessions in ``store``; events go to ``bus``.

    ``engine_for(settings)`` gives the engine for a session's settings (model, mode); ``tools`` are offered
    to every session; a session's ``system`` setting becomes a system prompt middleware."""

    def __init__(
        self,
        store: SQLTurnStore,
        bus: EventBus,
        engine_for: Callable[[dict[str, Any]], Engine],
        tools: ToolRegistry | None = None,
    ) -> None:
        self.store, self.bus, self.engine_for, self.tools = store, bus, engine_for, tools
        self.profile_name = ""  # shown by GET /api/info
        self.worker = worker_name()
        self._running: dict[str, _Running] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._control: asyncio.Task[None] | None = None
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
        self, session_id: str, text: str, *, seed: Turn | None = None, settings: dict[str, Any] | None = None
    ) -> Started:
        """Begin an inference of ``text`` in ``session_id``; :class:`Busy` while one runs in any worker.

        ``seed``, for a session with no snapshot yet, is saved first as its history (a front-end that
        holds earlier messages). ``settings``: the session's, when the caller has just read them."""
        if settings is None:
            settings = await self.settings(session_id)
        lease = await self.store.try_lock(session_id)
        if lease is None:
            raise Busy(
                f"session {session_id} is running an inference; wait for its {RUN_FINISHED} event or "
                f"POST /api/sessions/{session_id}/cancel"
            )
        try:
            await self._settle_stale(session_id)
            if seed is not None and not await self.store.load_session(session_id):
                await self.store.save_snapshot(session_id, seed)
            inference_id = new_id()
            after = await self.bus.last_id(session_id)
            await self.store.begin_inference(session_id, inference_id, worker=self.worker, prompt=text)
            running = self._running[session_id] = _Running(inference_id)
            await self.publisher.publish(
                session_id,
                {"type": RUN_STARTED, "session_id": session_id, "inference_id": inference_id, "prompt": text},
            )
        except BaseException:
            self._running.pop(session_id, None)
            await lease.release()
            raise
        task = asyncio.get_running_loop().create_task(self._run(session_id, text, settings, running, lease))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return Started(session_id, inference_id, after)

    async def _settle_stale(self, session_id: str) -> None:
        """Inferences recorded as running while nobody holds the session's lease: their worker died."""
        for record in await self.store.inferences(session_id, status="running"):
            reason = f"the worker running it ({record.worker}) stopped before it ended"
            await self.store.end_inference(session_id, record.inference_id, "failed", reason)
            await self.publisher.publish(
                session_id,
                {
                    "type": RUN_FINISHED,
                    "session_id": session_id,
                    "inference_id": record.inference_id,
                    "status": "failed",
                    "error": reason,
                },
            )

    async def _run(
        self, session_id: str, text: str, settings: dict[str, Any], running: _Running, lease: SessionLease
    ) -> None:
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

        def sink(event: Event) -> None:
            queue.put_nowait(event.to_dict())

        async def pump() -> None:
            while (item := await queue.get()) is not None:
                item["inference_id"] = running.inference_id
                await self.publisher.publish(session_id, item)

        pumping = asyncio.get_running_loop().create_task(pump())
        status, error, turn_id = "failed", None, None
        try:
            session = await self._session(session_id, settings, sink)
            session.prompt(text)
            running.handle = session.start_inference(inference_id=running.inference_id)
            if running.cancelled:
                running.handle.cancel()
            out = await running.handle.wait()
            status, turn_id = "completed", out.id
        except InferenceCancelled:
            status, error = "cancelled", "cancelled by a request"
        except asyncio.CancelledError:
            status, error = "cancelled", "the server shut down"
            raise
        except Exception as exc:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
            log.warning("inference %s of session %s failed: %s", running.inference_id, session_id, error)
            server_metrics.count("inferences_failed", type(exc).__name__)
        finally:
            queue.put_nowait(None)
            await asyncio.shield(self._finish(session_id, running, lease, pumping, status, error, turn_id))

    async def _finish(
        self,
        session_id: str,
        running: _Running,
        lease: SessionLease,
        pumping: asyncio.Task[None],
        status: str,
        error: str | None,
        turn_id: str | None,
    ) -> None:
        try:
            await pumping
            await self.store.end_inference(session_id, running.inference_id, status, error)
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
            await self.publisher.publish(session_id, finished)
        except Exception:
            log.exception("could not record the end of inference %s", running.inference_id)
        finally:
            if self._running.get(session_id) is running:
                del self._running[session_id]
            running.done.set()
            await lease.release()

    async def _session(self, session_id: str, settings: dict[str, Any], sink: Callable[[Event], None]) -> Session:
        middlewares: list[Middleware] = []
        if settings.get("system"):
            middlewares.append(system_prompt(str(settings["system"])))
        session = Session(
            self.engine_for(settings),
            tools=self.tools,
            middlewares=middlewares,
            store=self.store,
            session_id=session_id,
            sinks=[sink],
            record_events=True,
        )
        for snapshot in await self.store.load_session(session_id):
            session.append(snapshot)
        return session

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

    def _cancel_here(self, session_id: str, inference_id: str) -> bool:
        running = self._running.get(session_id)
        if running is None or running.inference_id != inference_id:
            return False
        running.cancelled = True
        if running.handle is not None:
            running.handle.cancel()
        return True

    def running_here(self, session_id: str) -> str | None:
        running = self._running.get(session_id)
        return running.inference_id if running is not None else None
