"""Where an engine writes what one request used and cost: the turn, the response's last block, the event."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..events import EventMetadata, Usage
from ..turns import TURN_META_USAGE, Block, Turn, block_meta_key, turn_meta_key
from ._context import current_prices
from ._cost import Cost, price

__all__ = ["BLOCK_META_USAGE", "TURN_META_COST", "record_usage"]

TURN_META_COST = turn_meta_key("geppetto", "cost", 1, dict)
"""USD of the last provider call (``Cost.to_dict()``: input, cached_input, cache_write, output, reasoning,
total); absent when that call was unpriced."""
BLOCK_META_USAGE = block_meta_key("geppetto", "usage", 1, dict)
"""On the last block of each response: ``{"usage": {...}, "cost": {...} or None, "model": ...}``, so the
blocks of a Turn say what each of its requests used and cost (sum them for the Turn)."""


def record_usage(
    turn: Turn, blocks: Sequence[Block], meta: EventMetadata, *, provider: str, model: str, usage: Usage | None
) -> Cost | None:
    """Price ``usage`` with the table in force and record it: ``TURN_META_USAGE``/``TURN_META_COST`` on
    ``turn`` (removed when absent, so a stale figure of an earlier request never stays), ``BLOCK_META_USAGE`` on
    the last of ``blocks``, ``usage`` and ``cost`` on ``meta`` (the ``final`` event's). Returns the cost."""
    cost = price(usage, provider, model, current_prices())
    if usage is None:
        TURN_META_USAGE.delete(turn.metadata)
    else:
        TURN_META_USAGE.set(turn.metadata, usage.to_dict())
    if cost is None:
        TURN_META_COST.delete(turn.metadata)
    else:
        TURN_META_COST.set(turn.metadata, cost.to_dict())
    if blocks:
        stamp: dict[str, Any] = {
            "usage": usage.to_dict() if usage is not None else None,
            "cost": cost.to_dict() if cost is not None else None,
            "model": model,
        }
        BLOCK_META_USAGE.set(blocks[-1].metadata, stamp)
    meta.usage = usage
    meta.cost = cost.to_dict() if cost is not None else None
    return cost
