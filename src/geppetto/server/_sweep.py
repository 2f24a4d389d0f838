"""A server worker's sweep: inferences whose worker died are settled (or, when they were reading a background
response, picked up), the ends the store refused are recorded again, inferences whose lease this worker lost
are stopped. The :class:`~geppetto.server._runner.Runner` owns one :class:`Sweeper`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from ..session.stores import InferenceRecord, SessionLease, SQLTurnStore
from ..tools import JournalRecord
from ._background import record_of
from ._inference import RUN_FINISHED, _Running
from ._publish import Publisher

__all__ = ["Sweeper"]

log = logging.getLogger("geppetto.server")


class Sweeper:
    """Every ``sweep_interval`` seconds (0: never), once started, a worker runs :meth:`sweep`: it cancels its
    inferences whose lease it lost and settles inferences left ``running`` by a worker that is gone.

    What it needs of its runner is given: the store and publisher, the inferences running in this worker
    (``running``, by session; the runner's own dict), how to read a session's settings, cancel an inference
    here, and run an inference it picks up (``run``, in a task made by ``spawn``)."""

    def __init__(
        self,
        store: SQLTurnStore,
        publisher: Publisher,
        running: dict[str, _Running],
        *,
        sweep_interval: float,
        settings: Callable[[str], Awaitable[dict[str, Any]]],
        cancel_here: Callable[..., bool],
        run: Callable[[str, str, dict[str, Any], _Running, SessionLease], Coroutine[Any, Any, None]],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self.store, self.publisher, self._running = store, publisher, running
        self.sweep_interval = sweep_interval
        self.settings, self._cancel_here, self._run, self._spawn = settings, cancel_here, run, spawn
        self._stale_seen: dict[str, str] = {}  # session -> its running inference found without a lease
        self._unrecorded: dict[tuple[str, str], tuple[str, str | None]] = {}  # ends the store did not take
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Sweep every ``sweep_interval`` seconds from now on (never when it is 0)."""
        if self.sweep_interval > 0:
            self._task = asyncio.get_running_loop().create_task(self._sweep_every())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def done(self) -> bool:
        """Whether no sweep runs by itself (it was stopped, or never started)."""
        return self._task is None or self._task.done()

    def record_later(self, session_id: str, inference_id: str, status: str, error: str | None) -> None:
        """The store refused the end of an inference: the next sweep records it."""
        self._unrecorded[session_id, inference_id] = (status, error)

    async def settle_stale(self, session_id: str, lease: SessionLease) -> str | None:
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

    async def _journal_of(self, record: InferenceRecord) -> list[JournalRecord]:
        """The journal a stale inference left ([] when it has no checkpoint, or the journal is unreadable)."""
        try:
            rows = await self.store.journal_read(record.session_id)
        except Exception as exc:
            log.warning("could not read the journal of inference %s (%s)", record.inference_id, exc)
            return []
        mine = [r for r in rows if r.inference_id == record.inference_id]
        return mine if any(r.entry.startswith("step:") for r in mine) else []

    async def _pick_up(self, record: InferenceRecord, lease: SessionLease) -> bool:
        """Go on with an inference whose worker died while it read a background response or ran its tool loop:
        from the Turn and the cursor that worker recorded (see ``_background``), or from its journal. False when
        it left neither."""
        found = await record_of(self.store, record.session_id, record.inference_id)
        journal = await self._journal_of(record)
        if found is None and not journal:
            return False
        settings = await self.settings(record.session_id)
        if found is not None:
            log.warning(
                "inference %s of session %s: its worker (%s) stopped while it read background response %s; "
                "picking it up after sequence number %d",
                record.inference_id,
                record.session_id,
                record.worker,
                found.response_id,
                found.cursor,
            )
        else:
            log.warning(
                "inference %s of session %s: its worker (%s) stopped in its tool loop; picking it up from its "
                "journal (calls whose result is journaled are not run again)",
                record.inference_id,
                record.session_id,
                record.worker,
            )
        running = self._running[record.session_id] = _Running(
            record.inference_id, lease=lease, resume=found, journal=journal
        )
        self._spawn(self._run(record.session_id, record.prompt or "", settings, running, lease))
        return True
