"""``geppetto worker``: a Temporal worker running durable sessions (docs/durable.md)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Annotated, Any

import typer

from ..runtime import EngineSettings
from ._guard import fail, guarded
from ._options import BaseUrlOpt, ModelOpt, ModeOpt, ProfileOpt, ProviderOpt
from ._sessions import StoreOpt

__all__ = ["worker"]

TemporalOpt = Annotated[
    str, typer.Option("--temporal", metavar="HOST:PORT", help="The Temporal frontend to connect to.")
]
TaskQueueOpt = Annotated[str, typer.Option("--task-queue", help="The task queue durable sessions are run on.")]
NamespaceOpt = Annotated[str, typer.Option("--namespace", help="The Temporal namespace.")]


def worker(
    temporal: TemporalOpt,
    task_queue: TaskQueueOpt = "geppetto",
    namespace: NamespaceOpt = "default",
    profile: ProfileOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    mode: ModeOpt = None,
    with_tools: Annotated[bool, typer.Option("--with-tools", help="Offer the demo tools.")] = False,
    store: StoreOpt = None,
) -> None:
    """Run a Temporal worker for durable sessions: their provider requests and tool calls, until Ctrl-C.

    Sessions name the engine `default` (or the profile's name). With the simulator, start one with
    `geppetto simulate` and pass its --base-url to every worker, so they all talk to the same one."""
    try:
        from ..durable.temporal import DATA_CONVERTER
        from ..durable.temporal import worker as make_worker
    except ImportError as exc:
        fail(str(exc))
    from ..runtime import choose_profile, demo_registry, open_engine

    chosen = guarded(lambda: choose_profile(EngineSettings(profile, provider, model, base_url, mode)))
    tools = demo_registry() if with_tools else None

    async def run(engine: Any) -> None:
        from temporalio.client import Client

        try:
            client = await Client.connect(temporal, namespace=namespace, data_converter=DATA_CONVERTER)
        except Exception as exc:
            fail(f"cannot connect to Temporal at {temporal} ({exc}); start one with `temporal server start-dev`")
        the_store = None
        if store is not None:
            from ..session.stores import open_store

            the_store = open_store(store)
        engines = {"default": lambda: engine, chosen.name: lambda: engine}
        w = make_worker(client, task_queue=task_queue, engines=engines, tools=tools or (), store=the_store)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(
            f"geppetto worker on task queue {task_queue!r} at {temporal} (engine: {chosen.name}, "
            f"tools: {', '.join(tools.names()) if tools else 'none'}); Ctrl-C stops it",
            flush=True,
        )
        async with w:
            await stop.wait()
        print("worker stopped", file=sys.stderr)

    with open_engine(chosen) as opened:
        asyncio.run(run(opened.engine))
    # The SDK's native threads outlive the event loop and abort the interpreter's finalization (SIGABRT,
    # "PyGILState_Release"): the worker has stopped cleanly, so leave without finalizing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
