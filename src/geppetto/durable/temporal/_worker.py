"""A Temporal worker running geppetto's session workflow and its activities."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from ...engine import Engine
from ...tools import Tool, ToolRegistry
from ._activities import Activities, RelayFactory
from ._converter import check_client
from ._workflow import SessionWorkflow

__all__ = ["WORKFLOW_RUNNER", "worker"]

WORKFLOW_RUNNER = SandboxedWorkflowRunner(
    restrictions=SandboxRestrictions.default.with_passthrough_modules("geppetto", "httpx", "pydantic", "yaml")
)
"""The sandbox geppetto's workflow runs in (geppetto's own modules passed through: the workflow only reads
Turns with them)."""


def worker(
    client: Client,
    *,
    task_queue: str,
    engines: Mapping[str, Callable[[], Engine] | str],
    tools: ToolRegistry | Iterable[Tool | Callable[..., Any]] = (),
    store: Any = None,
    events: RelayFactory | None = None,
) -> Worker:
    """A worker for ``task_queue`` running geppetto's session workflow, its provider requests and its tool
    calls (run it with ``await w.run()``, or ``async with w:``).

    ``engines`` maps the names :class:`DurableSession(engine=...) <geppetto.durable.temporal.DurableSession>`
    uses to a zero-argument callable that builds the engine, or to a profile name (``"sim"``); each is built
    once, on first use. ``tools`` are the tools every session is offered; ``store`` (a
    :class:`~geppetto.session.TurnStore`) gets each request's snapshot, as a Session's store does, and a
    session's first request starts from its latest snapshot there. ``events(session_id, context)`` gives the
    sink of a request's events (``geppetto serve --temporal`` publishes them on its bus).
    ``client`` must use :data:`~geppetto.durable.temporal.DATA_CONVERTER`.
    """
    check_client(client, "worker()")
    acts = Activities(engines, tools, store, events)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[SessionWorkflow],
        activities=[acts.request, acts.tool],
        workflow_runner=WORKFLOW_RUNNER,
    )
