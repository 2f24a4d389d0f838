"""``ToolContext``: what a tool may learn of the call it answers (its session, call id, the application's deps)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..turns import TURN_META_INFERENCE_ID, TURN_META_SESSION_ID, Block, Turn, copy_json

__all__ = ["DEPS", "ToolContext", "TurnView", "context_for", "using_deps"]

DEPS: contextvars.ContextVar[Any] = contextvars.ContextVar("geppetto_tool_deps", default=None)
"""The application object tools of the running inference receive as ``ctx.deps`` (``Session(deps=...)``)."""


@contextlib.contextmanager
def using_deps(deps: Any) -> Iterator[None]:
    """Give ``deps`` to the tools run inside the block (and the tasks it starts)."""
    token = DEPS.set(deps)
    try:
        yield
    finally:
        DEPS.reset(token)


class TurnView:
    """A read-only view of the Turn a tool call was made in: ``id``, ``blocks`` (copies: changing one
    changes nothing), ``metadata`` and ``data`` (read-only mappings of copies). Each is made when first read."""

    __slots__ = ("_turn",)

    def __init__(self, turn: Turn) -> None:
        self._turn = turn

    @property
    def id(self) -> str:
        return self._turn.id

    @property
    def blocks(self) -> tuple[Block, ...]:
        return tuple(b.copy() for b in self._turn.blocks)

    @property
    def metadata(self) -> Mapping[str, Any]:
        return MappingProxyType(copy_json(dict(self._turn.metadata)))

    @property
    def data(self) -> Mapping[str, Any]:
        return MappingProxyType(copy_json(dict(self._turn.data)))

    def __repr__(self) -> str:
        return f"TurnView(id={self.id!r}, {len(self._turn.blocks)} blocks)"


@dataclass(frozen=True)
class ToolContext:
    """What a tool learns of the call it answers. A tool whose first parameter is annotated
    ``ToolContext`` receives it there (the parameter is not part of the tool's JSON schema)::

        @gp.tool
        def lookup(ctx: gp.ToolContext, order_id: str) -> str:
            return ctx.deps.db.find(order_id, idempotency_key=ctx.call_id)

    ``session_id`` and ``inference_id`` name the session and inference ("" outside a session);
    ``call_id`` is the model's id of this call (unique in the Turn: an idempotency key); ``tool_name``
    the tool's; ``deps`` the object given as ``Session(..., deps=...)`` (None when none was); ``turn`` a
    read-only :class:`TurnView` of the Turn the call was made in.
    """

    session_id: str
    inference_id: str
    call_id: str
    tool_name: str
    deps: Any = None
    turn: TurnView | None = field(default=None, repr=False)


def context_for(turn: Turn | None, call_id: str, tool_name: str) -> ToolContext:
    """The context of call ``call_id`` of ``tool_name`` made in ``turn``."""
    if turn is None:
        return ToolContext("", "", call_id, tool_name, DEPS.get())
    return ToolContext(
        session_id=TURN_META_SESSION_ID.get(turn.metadata) or "",
        inference_id=TURN_META_INFERENCE_ID.get(turn.metadata) or "",
        call_id=call_id,
        tool_name=tool_name,
        deps=DEPS.get(),
        turn=TurnView(turn),
    )
