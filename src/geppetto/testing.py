"""Test doubles for user code: engines that need no network.

``FunctionEngine`` runs a function you write; ``ScriptedEngine`` appends queued blocks, one step per
call. For HTTP-level tests against a stateful server, use :mod:`geppetto.simulator`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ._exceptions import UsageError
from .turns import Block, Turn

__all__ = ["FunctionEngine", "ScriptedEngine"]


class FunctionEngine:
    """An engine that calls ``fn(turn)``; ``fn`` may be sync or async and may return a turn or ``None``
    (meaning it edited the turn in place)."""

    def __init__(self, fn: Callable[[Turn], Turn | Awaitable[Turn | None] | None]) -> None:
        self.fn = fn
        self.calls = 0

    async def run_inference(self, turn: Turn) -> Turn:
        self.calls += 1
        result: Any = self.fn(turn)
        if inspect.isawaitable(result):
            result = await result
        return turn if result is None else result


class ScriptedEngine:
    """An engine that appends the next queued step (a block or a list of blocks) on each call.

    Each step's blocks are copied with fresh ids, so one script can be replayed. ``turns`` records a
    clone of every turn the engine was given, for assertions.
    """

    def __init__(self, steps: Iterable[Block | list[Block]] = ()) -> None:
        self._steps: list[list[Block]] = [[s] if isinstance(s, Block) else list(s) for s in steps]
        self.turns: list[Turn] = []

    def push(self, *blocks: Block) -> None:
        """Queue one more step."""
        self._steps.append(list(blocks))

    @property
    def remaining(self) -> int:
        return len(self._steps)

    async def run_inference(self, turn: Turn) -> Turn:
        self.turns.append(turn.clone())
        if not self._steps:
            raise UsageError(
                f"ScriptedEngine has no step left for call {len(self.turns)}; queue more with push() or in the constructor"
            )
        for block in self._steps.pop(0):
            fresh = block.copy()
            fresh.id = Block(block.kind).id
            fresh.turn_id = ""
            turn.append(fresh)
        return turn
