"""The prefix guard on the Interactions API's signed steps (see :mod:`geppetto.providers._prefix_guard`).

A ``thought`` step's ``signature`` (and the ``signature`` of a server-side tool's call or result step) is
the model's reasoning, encrypted, made after every step before it. The prefix here is the Turn's blocks
before the signed one, each in the wire form the anchor proof fingerprints (:data:`WIRE`), under no header:
``system_instruction`` and ``tools`` are interaction-scoped on this API (sent with every request, never
part of the history a later interaction continues), so they are not part of the prefix (docs/decisions.md). The anchor proof's running digest over the blocks before an interaction is
reused to stamp its signed steps, so stamping costs O(new blocks).

Only steps the request sends are judged: in chained mode the steps the server holds behind
``previous_interaction_id`` are the Turn's (the anchor proof checked it), so they are never stale; the
delta after an earlier anchor (an edit made the later interactions unusable) and a whole-Turn request
(stateless, or a chained fallback) are. ``drop`` and ``rewrite`` (nothing to rewrite: the API takes no
append-only form of a changed prefix) leave a stale thought out, for good; a server-side tool step keeps
its content without the signature. When the thought left out was the one a function call of the current
turn (after the last ``user_input`` step sent) came after, a thought with Google's placeholder signature
stands in for it, as a thinking model refuses such a call without one; the block keeps that form in every
later request (``gemini.thought_stand_in@v1``), so the server's history stays the Turn's. ``error`` raises
before anything is sent.
"""

from __future__ import annotations

from typing import Any

from geppetto.turns import PAYLOAD_ITEM, PAYLOAD_THOUGHT_SIGNATURE, Block, BlockKind, Turn, watch_metadata_keys

from .._chain_wire import block_wire, prefix_hasher
from .._prefix_guard import REASONING_STALE, Unit, apply_policy, check, stamp
from .._streaming import call_names
from ._interactions_plan import InteractionPlan
from ._interactions_steps import PROVIDER, THOUGHT_STAND_IN, WIRE, blocks_to_steps, ours

__all__ = ["guard_plan", "signed", "stamp_interaction"]

watch_metadata_keys(REASONING_STALE, THOUGHT_STAND_IN)  # they change a sealed block's wire: the proof sees it

_NO_REWRITE = "the Interactions API cannot take a changed prefix append-only: dropped instead"


def signed(block: Block) -> bool:
    """True for one of this engine's blocks that carries a signature: a thought, or a server-side tool step."""
    if not ours(block):
        return False
    if block.kind is BlockKind.REASONING:
        return bool(block.payload.get(PAYLOAD_THOUGHT_SIGNATURE))
    item = block.payload.get(PAYLOAD_ITEM) if block.kind is BlockKind.OTHER else None
    return isinstance(item, dict) and bool(item.get("signature"))


def _units(blocks: list[Block], judged: set[int]) -> list[Unit]:
    """The blocks that are steps (a system block is not: naming its middleware would mislead)."""
    wires = ((block_wire(b, WIRE), b) for b in blocks)
    return [Unit(wire, b, id(b) in judged) for wire, b in wires if wire is not None]


def guard_plan(turn: Turn, plan: InteractionPlan, *, policy: str, model: str) -> None:
    """Leave the plan's stale signed steps out of its ``steps`` (in place), as ``policy`` says."""
    judged = {id(b) for b in plan.blocks if signed(b) and not REASONING_STALE.get(b.metadata)}
    if not judged:
        apply_policy(turn, PROVIDER, model, policy, [], [])  # nothing replayed: no report from before stays
        return
    units = _units(turn.blocks, judged)
    stale = check(units, "", scope=PROVIDER)
    apply_policy(turn, PROVIDER, model, policy, stale, units, note=_NO_REWRITE if policy == "rewrite" else "")
    if not stale:
        return
    # apply_policy marked them stale for good: their steps and the anchor proof's wire form leave them out
    plan.prefix = None  # the plan's digest counted the blocks as they were; the answer is tagged afresh
    gone = {id(s.block) for s in stale if s.block.kind is BlockKind.REASONING}
    for block in _needing_stand_ins(plan.blocks, gone, call_names(turn)):
        THOUGHT_STAND_IN.set(block.metadata, True)
    plan.steps = blocks_to_steps(plan.blocks, call_names(turn))


def _needing_stand_ins(blocks: list[Block], gone: set[int], names: dict[str, str]) -> list[Block]:
    """The thoughts of ``gone`` (left out) that a function call of the current turn (after the last
    ``user_input`` step sent) follows before the next result: each gets the placeholder in its place."""
    steps: list[tuple[dict[str, Any], Block | None]] = []
    for block in blocks:
        if id(block) in gone:
            steps.append(({"type": "thought"}, block))
        else:
            steps.extend((step, None) for step in blocks_to_steps([block], names))
    last_user = max((i for i, (s, _) in enumerate(steps) if s["type"] == "user_input"), default=-1)
    needing: list[Block] = []
    for index, (_, dropped) in enumerate(steps):
        if dropped is None or index < last_user:
            continue
        for later, other in steps[index + 1 :]:
            if later["type"] == "function_call":
                needing.append(dropped)
            if later["type"] in ("function_call", "function_result", "user_input") or other is not None:
                break
    return needing


def stamp_interaction(turn: Turn, start: int, prefix: Any) -> None:
    """Stamp the signed blocks of the interaction at ``turn.blocks[start:]`` with the prefix they follow.
    ``prefix``: the anchor proof's running digest over ``turn.blocks[:start]``, if the caller has it."""
    new = turn.blocks[start:]
    judged = {id(b) for b in new if signed(b)}
    if not judged:
        return
    if prefix is None:
        prefix = prefix_hasher(turn.blocks[:start], WIRE)
    stamp(_units(new, judged), "", new, start=prefix, scope=PROVIDER)
