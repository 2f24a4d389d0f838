"""The inferences a server worker runs: one per session across every worker (the store's lease), events
published to the bus in order, the outcome recorded, a cancel heard from any worker.

:class:`Runner` starts and cancels inferences and follows the control topic; how one runs is in
``_inference``, the sweep of inferences whose worker died in ``_sweep``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._exceptions import UsageError, UsageLimitExceeded
from ..session import Session
from ..session._approvals import prepare_resume
from ..session.stores import SessionLease
from ..tools import ToolDefinition
from ..turns import Turn, new_id
from ._client_tools import SessionTools
from ._inference import HOT_SESSIONS, RUN_FINISHED, RUN_STARTED, SWEEP_INTERVAL, NotFound, _Running, worker_name
from ._metrics import server_metrics
from ._sweep import SweepingRunner

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


class Runner(SweepingRunner):
    """Starts, runs and cancels inferences for the sessions in ``store``; events go to ``bus``.

    ``engine_for(settings)`` gives the engine for a session's settings (model, mode); ``tools`` are offered
    to every session; a session's ``system`` setting becomes a system prompt middleware.

    Every ``sweep_interval`` seconds (0: never) a worker runs ``sweep()``: it cancels its inferences whose
    lease it lost and settles inferences left ``running`` by a worker that is gone."""

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
            session = await self._prepared(session_id, text, settings, decisions, client_tools, files)
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
