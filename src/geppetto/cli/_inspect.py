"""``geppetto inspect``: a Turn's blocks with their provenance, the anchor, and what a chained request would send."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from ..turns import (
    BLOCK_META_INFERENCE_ID,
    BLOCK_META_RESPONSE_ID,
    PAYLOAD_ARGS,
    PAYLOAD_ERROR,
    PAYLOAD_NAME,
    PAYLOAD_RESULT,
    PAYLOAD_SUMMARY,
    TURN_META_PROVIDER,
    Block,
    BlockKind,
    Turn,
    result_text,
)

__all__ = ["ChainedPlan", "chained_plan", "describe", "render_turn", "turn_report"]


@dataclass(frozen=True)
class ChainedPlan:
    """What a chained Responses request for this turn would do: the anchor (None: full resend), the
    ids of the blocks it would send, and why there is no anchor when there is none."""

    anchor: str | None
    sent_ids: list[str]
    reason: str = ""


def chained_plan(turn: Turn) -> ChainedPlan:
    """The anchor and the blocks after it, by the engine's own rules (find_best_anchor/blocks_after_response)."""
    from ..providers.openai_responses import blocks_after_response, find_best_anchor
    from ..providers.openai_responses._anchors import scan_anchors

    anchor = find_best_anchor(turn)
    if anchor is None:
        return ChainedPlan(None, [b.id for b in turn.blocks], scan_anchors(turn).reason())
    return ChainedPlan(anchor, [b.id for b in blocks_after_response(turn, anchor)])


def _short(value: str | None, width: int) -> str:
    # Prefixes are enough to tell ids apart by eye; the file holds the full ones.
    return (value or "")[:width]


def _preview(text: str, width: int = 32) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def describe(block: Block) -> str:
    """What the text column shows: the text, a tool call as ``name(args)``, a result or its error."""
    p = block.payload
    if block.kind is BlockKind.TOOL_CALL:
        return f"{p.get(PAYLOAD_NAME, '')}({json.dumps(p.get(PAYLOAD_ARGS), ensure_ascii=False)})"
    if block.kind is BlockKind.TOOL_USE:
        error = p.get(PAYLOAD_ERROR)
        return f"error: {error}" if error is not None else result_text(p.get(PAYLOAD_RESULT))
    if block.kind is BlockKind.REASONING and not block.text:
        summary = p.get(PAYLOAD_SUMMARY)
        return str(summary) if summary else "(encrypted)"
    return block.text


def _marks(turn: Turn, plan: ChainedPlan) -> list[str]:
    """Per block: ``anchor`` (the last block of the anchor response), ``send`` (in the delta) or ``""``."""
    sent = set(plan.sent_ids)
    last_of_anchor = max(
        (i for i, b in enumerate(turn.blocks) if BLOCK_META_RESPONSE_ID.get(b.metadata) == plan.anchor),
        default=-1,
    )
    return [
        "anchor" if plan.anchor is not None and i == last_of_anchor else ("send" if b.id in sent else "")
        for i, b in enumerate(turn.blocks)
    ]


def _chains(turn: Turn) -> bool:
    """Whether the turn's last engine was the Responses engine (or none is recorded)."""
    return TURN_META_PROVIDER.get(turn.metadata) in (None, "openai")


def turn_report(turn: Turn) -> dict[str, Any]:
    """The inspection as JSON: full ids of every block, its mark, and the chained-request plan."""
    plan = chained_plan(turn)
    blocks = [
        {
            "index": i,
            "kind": b.kind.value,
            "id": b.id,
            "turn_id": b.turn_id,
            "inference_id": BLOCK_META_INFERENCE_ID.get(b.metadata),
            "response_id": BLOCK_META_RESPONSE_ID.get(b.metadata),
            "chained": mark or None,
            "text": describe(b),
        }
        for i, (b, mark) in enumerate(zip(turn.blocks, _marks(turn, plan), strict=True))
    ]
    chained = {"anchor": plan.anchor, "sends": plan.sent_ids, "reason": plan.reason or None}
    return {"turn_id": turn.id, "provider": TURN_META_PROVIDER.get(turn.metadata), "blocks": blocks, "chained": chained}


def render_turn(turn: Turn, console: Console, *, title: str | None = None) -> ChainedPlan:
    """Print the table of ``turn``'s blocks and a one-line summary of the chained request; return the plan."""
    plan = chained_plan(turn)
    table = Table(title=title or f"turn {turn.id}", show_lines=False)
    for column, width in (("#", 3), ("kind", 9), ("id", 8), ("turn_id", 8), ("inference_id", 8)):
        table.add_column(column, min_width=width, no_wrap=True)
    table.add_column("response_id", min_width=14, no_wrap=True)
    table.add_column("chained", min_width=8, no_wrap=True)
    table.add_column("text", overflow="fold")
    for i, (block, mark) in enumerate(zip(turn.blocks, _marks(turn, plan), strict=True)):
        table.add_row(
            str(i),
            block.kind.value,
            _short(block.id, 8),
            _short(block.turn_id, 8),
            _short(BLOCK_META_INFERENCE_ID.get(block.metadata), 8),
            _short(BLOCK_META_RESPONSE_ID.get(block.metadata), 14),
            mark,
            _preview(describe(block)),
        )
    console.print(table)
    if not _chains(turn):
        provider = TURN_META_PROVIDER.get(turn.metadata)
        console.print(f"the last answer came from {provider}, which does not chain: every request sends the whole Turn")
    elif plan.anchor is None:
        console.print(
            f"no valid anchor ({plan.reason}): a chained request sends all {len(turn.blocks)} blocks, "
            "without previous_response_id"
        )
    else:
        console.print(
            f"chained request: previous_response_id={plan.anchor}, sends {len(plan.sent_ids)} of "
            f"{len(turn.blocks)} blocks"
        )
    return plan
