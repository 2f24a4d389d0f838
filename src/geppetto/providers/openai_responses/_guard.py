"""The prefix guard on the Responses API (see :mod:`geppetto.providers._prefix_guard`).

OpenAI keeps a ``reasoning`` item (sent with its ``encrypted_content``, or by reference) only when what
precedes it is what it was produced after; otherwise the item is dropped silently: the request succeeds,
the model reasons again and the bill grows. The prefix here is the Turn's blocks before the reasoning
block, each in the wire form the anchor proof fingerprints (``_anchors``), under a header of the
``instructions`` when system blocks travel there. The anchor proof's running digest over the blocks
before a response is reused to stamp that response's reasoning, so stamping costs O(new blocks).

It applies to every request that replays reasoning: a stateless one (the whole Turn), a chained or
conversation delta (reasoning after an earlier anchor, when an edit made the later responses unusable as
anchors) and the seed of a new conversation. ``rewrite`` has nothing to rewrite on this API (it takes
no system message after the fact that keeps earlier reasoning valid): it drops, and says so.
"""

from __future__ import annotations

from typing import Any

from geppetto.turns import BlockKind, Turn
from geppetto.turns._watch import watch_metadata_keys

from .._chain import block_wire
from .._prefix_guard import REASONING_STALE, Unit, apply_policy, check, header_digest, stamp, start_digest
from ._anchors import wire_for
from ._items import blocks_to_items, replayed_reasoning
from ._plan import Plan, seed_split

__all__ = ["guard_plan", "stamp_response"]

watch_metadata_keys(REASONING_STALE)  # marking a sealed block changes its wire form: the proof sees it

_NO_REWRITE = "the Responses API cannot take a changed prefix append-only: dropped instead"


def _head(turn: Turn, include_system: bool) -> str:
    """The header: the ``instructions`` text when system blocks are sent there, else nothing."""
    if include_system:
        return ""
    system = [b.text for b in turn.blocks if b.kind is BlockKind.SYSTEM and b.text]
    return header_digest("\n\n".join(system)) if system else ""


def guard_plan(turn: Turn, plan: Plan, *, include_system: bool, policy: str, model: str) -> None:
    """Leave the plan's stale reasoning out of its items (and its conversation seed), as ``policy`` says."""
    replayed = {id(b) for b in replayed_reasoning(plan.blocks)}
    if not replayed:
        apply_policy(turn, "openai", model, policy, [], [])
        return
    units = [Unit(block_wire(b, wire_for(include_system)) or b"", b, id(b) in replayed) for b in turn.blocks]
    stale = check(units, _head(turn, include_system))
    apply_policy(turn, "openai", model, policy, stale, units, note=_NO_REWRITE if policy == "rewrite" else "")
    if not stale:
        return
    plan.stale = frozenset(s.block.id for s in stale)
    # apply_policy marked them stale for good: the anchor proof's wire form leaves them out from now on
    plan.prefix = None  # the plan's digest counted the blocks as they were; the response is tagged afresh
    items = blocks_to_items(plan.blocks, include_system=include_system, stale=plan.stale)
    if plan.seed_items is not None:
        plan.seed_items, plan.items = seed_split(items)
    else:
        plan.items = items


def stamp_response(turn: Turn, start: int, prefix: Any, *, include_system: bool) -> None:
    """Stamp the reasoning blocks of the response at ``turn.blocks[start:]`` with the prefix they follow.
    ``prefix``: the anchor proof's running digest over ``turn.blocks[:start]``, if the caller has it."""
    new = turn.blocks[start:]
    if not any(b.kind is BlockKind.REASONING for b in new):
        return
    head = _head(turn, include_system)
    if head:  # the anchor proof's digest starts from nothing, so it serves only without a header
        prefix = None
    if prefix is None:
        prefix = start_digest(head)
        for block in turn.blocks[:start]:
            prefix.update(block_wire(block, wire_for(include_system)) or b"")
    units = [Unit(block_wire(b, wire_for(include_system)) or b"", b, b.kind is BlockKind.REASONING) for b in new]
    stamp(units, head, new, start=prefix)
