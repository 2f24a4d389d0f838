"""The engine contract: one coroutine that completes a turn.

Engines append the blocks a provider produced and publish events to the sinks in context; they never
run tools (the ``tool_loop`` middleware does). Middleware and the tool loop have the same shape, so
they compose like functions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from ._exceptions import UsageError
from .turns import Turn

__all__ = ["Engine", "Handler", "run_sync"]

Handler = Callable[[Turn], Awaitable[Turn]]
"""What middleware wraps: ``async (turn) -> turn``."""


@runtime_checkable
class Engine(Protocol):
    """Anything with ``async run_inference(turn) -> turn``."""

    async def run_inference(self, turn: Turn) -> Turn: ...


def run_sync(engine: Engine, turn: Turn) -> Turn:
    """Run one inference from synchronous code (a script, a notebook cell without a loop, the CLI)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(engine.run_inference(turn))
    raise UsageError("run_sync() was called inside a running event loop; use `await engine.run_inference(turn)`")
