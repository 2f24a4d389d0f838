"""``geppetto serve --temporal HOST:PORT``: every session's prompts run as durable sessions on Temporal
(docs/durable.md), the routes unchanged.

Each server worker process also runs a Temporal worker for the task queue, with the server's engine, tools
and store: a prompt that arrives on any worker becomes an update to the session's workflow, whose request
activities run on whichever process Temporal gives them to and publish their events on the server's bus
(so readers on every worker see them), and whose Session saves each snapshot in the server's store. The
Runner still holds the session's lease and records the inference's start and end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from ..events import Event
from ..turns import Turn

__all__ = ["DurableRuns"]

log = logging.getLogger("geppetto.server")

ENGINE = "default"


class _Relay:
    """A request activity's events, published in order on the bus as the inference's."""

    def __init__(self, publisher: Any, session_id: str, inference_id: str) -> None:
        self.publisher, self.session_id, self.inference_id = publisher, session_id, inference_id
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._pump())

    def __call__(self, event: Event) -> None:
        self.queue.put_nowait(event.to_dict())

    async def aclose(self) -> None:
        self.queue.put_nowait(None)
        await self.task

    async def _pump(self) -> None:
        while (data := await self.queue.get()) is not None:
            data["inference_id"] = self.inference_id
            try:
                await self.publisher.publish(self.session_id, data)
            except Exception:  # the run goes on; readers miss this event
                log.exception("could not publish an event of inference %s", self.inference_id)


class DurableRuns:
    """The Temporal side of a server worker: its client and worker, and how a prompt runs durably."""

    def __init__(self, runner: Any, address: str, task_queue: str) -> None:
        """``runner``: the worker's :class:`~geppetto.server._runner.Runner` (its engine, tools, store and
        publisher are read; typed loosely, since the runner module imports this one)."""
        self.runner, self.address, self.task_queue = runner, address, task_queue
        self.client: Any = None
        self._worker: Any = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connect to Temporal and start this process's worker (raises naming the fix when it cannot)."""
        try:
            from temporalio.client import Client

            from ..durable.temporal import DATA_CONVERTER, worker
        except ImportError as exc:
            from .._extras import install_hint

            raise RuntimeError(f"--temporal needs the temporal extra: {install_hint('temporal')}") from exc
        try:
            self.client = await Client.connect(self.address, data_converter=DATA_CONVERTER)
        except Exception as exc:
            raise RuntimeError(
                f"cannot connect to Temporal at {self.address} ({exc}); start one with `temporal server start-dev`"
            ) from exc
        runner = self.runner
        self._worker = worker(
            self.client,
            task_queue=self.task_queue,
            engines={ENGINE: lambda: runner.engine_for({})},
            tools=runner.tools or (),
            store=runner.store,
            events=self._relay,
        )
        self._task = asyncio.get_running_loop().create_task(self._worker.run())

    async def close(self) -> None:
        if self._worker is not None and self._task is not None and not self._task.done():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._worker.shutdown(), 15)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task

    def _relay(self, session_id: str, context: Mapping[str, str]) -> _Relay | None:
        inference_id = context.get("inference_id")
        return _Relay(self.runner.publisher, session_id, inference_id) if inference_id else None

    async def run(
        self,
        session_id: str,
        settings: dict[str, Any],
        text: str,
        files: list[dict[str, Any]] | None,
        decisions: Mapping[str, Any] | None,
        inference_id: str,
    ) -> Turn:
        """The prompt (or the decisions) as an update to the session's workflow; its output Turn."""
        from ..durable.temporal import DurableSession

        system = settings.get("system")
        s = DurableSession(
            self.client,
            task_queue=self.task_queue,
            engine=ENGINE,
            session_id=session_id,
            system=str(system) if system else None,
        )
        context = {"inference_id": inference_id}
        if decisions is None:
            return await s.run(text, files=files, context=context)
        return await s.resume(dict(decisions), context=context)
