"""Where an engine writes what one request used and cost: the turn, the response's last block, the event."""

from __future__ import annotations

from collections.abc import Sequence

from ..events import EventMetadata, Usage
from ..turns import TURN_META_USAGE, Block, Turn, block_meta_key, turn_meta_key
from ._context import current_prices
from ._cost import Cost

__all__ = ["BLOCK_META_USAGE", "TURN_META_COST", "record_usage"]

TURN_META_COST = turn_meta_key("geppetto", "cost", 1, dict)
"""USD of the last provider call (``Cost.to_dict()``: input, cached_input, cache_write, output, reasoning,
total; and ``uncached``: the same tokens with no cache read or write); absent when that call was unpriced."""
BLOCK_META_USAGE = block_meta_key("geppetto", "usage", 1, dict)
"""On the last block of each response: ``{"usage": {...}, "cost": {...} or None, "model": ...}``, so the
blocks of a Turn say what each of its requests used and cost (sum them for the Turn)."""


def record_usage(
    turn: Turn, blocks: Sequence[Block], meta: EventMetadata, *, provider: str, model: str, usage: Usage | None
) -> Cost | None:
    """Price ``usage`` with the table in force and record it: ``TURN_META_USAGE``/``TURN_META_COST`` on
    ``turn`` (removed when absent, so a stale figure of an earlier request never stays), ``BLOCK_META_USAGE`` on
    the last of ``blocks``, ``usage`` and ``cost`` on ``meta`` (the ``final`` event's). Returns the cost."""
    rates = current_prices().rates(provider, model, usage) if usage is not None and model else None
    priced: dict[str, float] | None = None
    cost: Cost | None = None
    if rates is not None and usage is not None:
        cost = rates.cost(usage)
        # what the same tokens cost with nothing read from or written to a cache (a stateless request is
        # billed the same input tokens as a chained one: only caching changes the price)
        priced = {**cost.to_dict(), "uncached": rates.uncached_total(usage)}
    used = usage.to_dict() if usage is not None else None
    if used is None:
        TURN_META_USAGE.delete(turn.metadata)
    else:
        TURN_META_USAGE.set(turn.metadata, used)
    if priced is None:
        TURN_META_COST.delete(turn.metadata)
    else:
        TURN_META_COST.set(turn.metadata, priced)
    if blocks:
        BLOCK_META_USAGE.set(blocks[-1].metadata, {"usage": used, "cost": priced, "model": model})
    meta.usage = usage
    meta.cost = priced
    return cost
