"""A tool's :class:`~geppetto.Retry`: the call's error asks the model to try again, a bounded number of times."""

from __future__ import annotations

from collections.abc import Sequence

from ..turns import Block, BlockKind, Turn, block_meta_key
from ._registry import ToolRegistry

__all__ = ["TOOL_RETRY", "over_the_bound", "retries_spent", "retry_error"]

TOOL_RETRY = block_meta_key("geppetto", "tool_retry", 1, str)
"""``geppetto.tool_retry@v1`` on a ``tool_use``: the tool that raised :class:`~geppetto.Retry` for this call."""


def retry_error(name: str, message: str) -> str:
    """What the model reads for a call whose tool raised ``Retry(message)``."""
    return f"{message} (tool {name} asks you to correct the call and try again)"


def retries_spent(turn: Turn | None, name: str) -> int:
    """How many calls of tool ``name`` raised :class:`~geppetto.Retry` since the turn's last user block."""
    if turn is None:
        return 0
    count = 0
    for block in reversed(turn.blocks):
        if block.kind is BlockKind.USER:
            break
        if block.kind is BlockKind.TOOL_USE and TOOL_RETRY.get(block.metadata) == name:
            count += 1
    return count


def over_the_bound(turn: Turn | None, registry: ToolRegistry, blocks: Sequence[Block]) -> Block | None:
    """The first of ``blocks`` (a step's answers) whose tool raised Retry more often than its ``max_retries``
    allows in this inference (the earlier answers of ``turn`` included), or None."""
    fresh: dict[str, int] = {}
    for block in blocks:
        name = TOOL_RETRY.get(block.metadata)
        if name is None:
            continue
        fresh[name] = fresh.get(name, 0) + 1
        tool = registry.get(name)
        allowed = tool.max_retries if tool is not None else 0
        if retries_spent(turn, name) + fresh[name] > allowed:
            return block
    return None
