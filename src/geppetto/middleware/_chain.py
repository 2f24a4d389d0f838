"""Composing middleware around an engine, and the snapshot helpers middleware and engines share."""

from __future__ import annotations

from collections.abc import Callable

from ..engine import Engine, Handler
from ..turns import Block, Turn, block_ids, new_blocks

__all__ = ["Middleware", "MiddlewareEngine", "new_blocks_not_in", "snapshot_block_ids", "with_middleware"]

Middleware = Callable[[Handler], Handler]
"""A function from the next handler to a new handler."""


class MiddlewareEngine:
    """An engine wrapped in middleware; itself an :class:`Engine`."""

    def __init__(self, engine: Engine, middlewares: tuple[Middleware, ...]) -> None:
        self.engine = engine
        self.middlewares = middlewares
        handler: Handler = engine.run_inference
        for mw in reversed(middlewares):
            handler = mw(handler)
        self._handler = handler

    async def run_inference(self, turn: Turn) -> Turn:
        return await self._handler(turn)


def with_middleware(engine: Engine, *middlewares: Middleware) -> Engine:
    """Wrap ``engine`` so that ``middlewares[0]`` runs outermost (first on the way in, last on the way out)."""
    return MiddlewareEngine(engine, middlewares)


def snapshot_block_ids(turn: Turn) -> set[str]:
    """The ids of the blocks in ``turn`` now."""
    return block_ids(turn.blocks)


def new_blocks_not_in(turn: Turn, ids: set[str]) -> list[Block]:
    """The blocks of ``turn`` whose ids are not in ``ids``, in turn order (the blocks themselves, not copies)."""
    return new_blocks(turn.blocks, ids)
