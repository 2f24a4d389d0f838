"""The client side of a durable session: a handle shaped like :class:`~geppetto.Session`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.client import (
    Client,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError

from ..._exceptions import GeppettoError, UsageError
from ...middleware import Middleware
from ...tools import ApprovalPendingError, PendingCall
from ...turns import Turn, attachments, new_id
from ._activities import output_entry
from ._converter import check_client
from ._types import PromptInput, ResumeInput, SessionStart
from ._workflow import PENDING_MEMO, WORKFLOW, SessionWorkflow

__all__ = ["DurableSession", "Timeouts", "workflow_id"]


@dataclass(frozen=True)
class Timeouts:
    """The bounds of a durable session's activities.

    ``heartbeat_s``: an activity whose worker stops heartbeating for this long is retried on another worker
    (a SIGKILLed worker's request is retried within ``heartbeat_s`` plus the retry's wait, a second or so).
    ``request_s`` and ``tool_s`` bound one attempt of a provider request and of a tool call;
    ``max_attempts`` bounds the attempts of each.
    """

    request_s: float = 600.0
    tool_s: float = 600.0
    heartbeat_s: float = 20.0
    max_attempts: int = 10


def workflow_id(session_id: str) -> str:
    """The id of the workflow of session ``session_id``."""
    return f"geppetto-session-{session_id}"


def _reference(m: Middleware | str) -> str:
    if isinstance(m, str):
        if ":" not in m:
            raise UsageError(f"middleware {m!r}: name it as 'module:attribute', e.g. 'myapp.middleware:audit'")
        return m
    module, name = getattr(m, "__module__", None), getattr(m, "__qualname__", None)
    if not module or not name or "<locals>" in name or module == "__main__":
        raise UsageError(
            f"DurableSession(middlewares=...) takes middleware the worker can import: a module-level "
            f"middleware or a 'module:attribute' string, not {m!r} (the workers run it, not this process); "
            "for a system prompt pass system='...'"
        )
    return f"{module}:{name}"


class DurableSession:
    """A session whose prompts run as a Temporal workflow (docs/durable.md): any worker on ``task_queue``
    (:func:`~geppetto.durable.temporal.worker`) makes its requests and runs its tools, and a run goes on
    on another worker when one stops.

    ``engine`` names one of the workers' engines; ``middlewares`` are importable references the workers
    resolve; ``system`` is the system prompt. ``client`` must use
    :data:`~geppetto.durable.temporal.DATA_CONVERTER`. The workflow starts with the first prompt; a
    ``DurableSession`` made later with the same ``session_id`` is a handle to the same session, which keeps
    the engine, middlewares, system prompt and timeouts its workflow was started with.
    """

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str,
        engine: str,
        session_id: str | None = None,
        middlewares: Sequence[Middleware | str] = (),
        system: str | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        check_client(client, "DurableSession")
        self.client = client
        self.task_queue = task_queue
        self.session_id = session_id or new_id()
        t = timeouts or Timeouts()
        self._start = SessionStart(
            session_id=self.session_id,
            engine=engine,
            middlewares=[_reference(m) for m in middlewares],
            system=system,
            request_timeout_s=t.request_s,
            tool_timeout_s=t.tool_s,
            heartbeat_s=t.heartbeat_s,
            max_attempts=t.max_attempts,
        )
        self._handle: WorkflowHandle[Any, Any] | None = None

    @property
    def workflow_id(self) -> str:
        return workflow_id(self.session_id)

    async def _workflow(self) -> WorkflowHandle[Any, Any]:
        if self._handle is None:
            self._handle = await self.client.start_workflow(
                WORKFLOW,
                self._start,
                id=self.workflow_id,
                task_queue=self.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
        return self._handle

    async def run(
        self,
        text: str,
        *,
        files: Iterable[Any] | None = None,
        output: Any = None,
        context: Mapping[str, str] | None = None,
    ) -> Turn:
        """Prompt the session and wait for its answer (tools run, each once, on the workers): the output Turn,
        which may end with calls waiting for approval (:meth:`pending_approvals`, :meth:`resume`).
        ``files`` are read here and sent inline; ``output`` asks for a structured answer as in
        :meth:`Session.run <geppetto.Session.run>` (read it with ``output_of``). ``context`` reaches the
        workers' event relay (``worker(events=...)``) with each request of this prompt."""
        prompt = PromptInput(
            text,
            attachments(files) if files else [],
            output_entry(output) if output is not None else None,
            dict(context or {}),
        )
        return await self._update(SessionWorkflow.prompt, prompt)

    async def resume(self, decisions: Mapping[str, bool | str], *, context: Mapping[str, str] | None = None) -> Turn:
        """Answer calls waiting for approval (``True`` approves, ``False`` or a reason denies) and go on; the
        output Turn. Any process may answer, at any time later: no worker is held while a call waits."""
        return await self._update(SessionWorkflow.resume, ResumeInput(dict(decisions), dict(context or {})))

    async def pending_approvals(self) -> list[PendingCall]:
        """The calls waiting for a person, in call order (read from the workflow's memo: no worker needs to run)."""
        handle = await self._workflow()
        memo = await (await handle.describe()).memo()
        waiting = memo.get(PENDING_MEMO) or []
        return [PendingCall(**w) for w in waiting]

    async def latest(self) -> Turn | None:
        """The session's latest Turn (None before its first answer)."""
        handle = await self._workflow()
        return await handle.query(SessionWorkflow.latest)

    async def _update(self, update: Any, arg: Any) -> Turn:
        handle = await self._workflow()
        update_id = new_id()  # the same update however often its calls time out and are made again
        try:
            while True:
                try:
                    started = await handle.start_update(
                        update, arg, id=update_id, wait_for_stage=WorkflowUpdateStage.ACCEPTED, result_type=Turn
                    )
                    break
                except WorkflowUpdateRPCTimeoutOrCancelledError:
                    _still_wanted()  # no worker took it yet (one is starting, say): ask again
            while True:
                try:
                    return await started.result()  # type: ignore[no-any-return]
                except WorkflowUpdateRPCTimeoutOrCancelledError:
                    _still_wanted()  # a long run outlasts one poll: poll again
        except WorkflowUpdateFailedError as exc:
            raise _as_geppetto(exc) from exc


def _still_wanted() -> None:
    """Re-raise a cancellation of the caller (the SDK reports it as an RPC timeout or cancellation)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _as_geppetto(exc: WorkflowUpdateFailedError) -> GeppettoError:
    cause: BaseException | None = exc.cause
    while cause is not None and not isinstance(cause, ApplicationError):
        cause = cause.cause if hasattr(cause, "cause") else None
    message = cause.message if isinstance(cause, ApplicationError) else str(exc.cause or exc)
    kind = cause.type if isinstance(cause, ApplicationError) else None
    if kind == "ApprovalPendingError":
        return ApprovalPendingError(message)
    if kind in ("UsageError", "ConfigurationError"):
        return UsageError(message)
    return GeppettoError(f"the durable session's prompt failed: {message}")
