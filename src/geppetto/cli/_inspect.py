"""``geppetto inspect``: a Turn's blocks with their provenance, the anchor, and what a chained request would send."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..turns import BLOCK_META_INFERENCE_ID, BLOCK_META_RESPONSE_ID, TURN_META_PROVIDER, Turn
from ..web import ChainedPlan, chained_plan, describe, plural, request_marks, turn_report

__all__ = ["ChainedPlan", "chained_plan", "describe", "render_turn", "turn_report"]


def _short(value: str | None, width: int) -> str:
    # Prefixes are enough to tell ids apart by eye; the file holds the full ones.
    return (value or "")[:width]


def _preview(text: str, width: int = 32) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _chains(turn: Turn) -> bool:
    """Whether the turn's last engine was a stateful one (Responses, Gemini Interactions), or none is recorded."""
    return TURN_META_PROVIDER.get(turn.metadata) in (None, "openai", "gemini-interactions")


def _carrying(plan: ChainedPlan) -> str:
    if plan.conversation:
        return f"conversation={plan.conversation}"
    if plan.anchor:
        return f"{plan.anchor_field}={plan.anchor}"
    if plan.mode == "conversation":
        return "in a new conversation"
    return f"without {plan.anchor_field}" if plan.mode == "chained" else "without server state"


def held(plan: ChainedPlan) -> ChainedPlan | None:
    """The plan after a new prompt, when the Turn ends where the server's context ends (a healthy chain: the
    request now would have nothing new to send), else None."""
    after = plan.next
    chains = after is not None and not after.error and not after.full and bool(after.anchor or after.conversation)
    if plan.fallback == "empty_delta" and chains:
        return plan.next
    return None


def plan_lines(plan: ChainedPlan, blocks: int) -> list[str]:
    """The request the engine would send now and, when that one sends the whole Turn, the one after a new
    prompt (both by the engine's own planning code)."""
    if plan.error:
        return [f"no request can be sent now: {plan.reason}"]
    if (after := held(plan)) is not None:
        kept = "its 1 block" if blocks == 1 else f"all {blocks} blocks"
        return [
            f"{after.mode}: the server holds {kept}; the next prompt is sent"
            + (f" with {plural(len(after.sent_ids), 'block')} before it" if after.sent_ids else " alone")
            + f", with {_carrying(after)}"
        ]
    if not plan.full:
        why = f" ({plan.reason})" if plan.reason else ""
        return [f"{plan.mode} request: {_carrying(plan)}, sends {len(plan.sent_ids)} of {plural(blocks, 'block')}{why}"]
    whole = "its 1 block" if blocks == 1 else f"all {blocks} blocks"
    lines = [f"{plan.mode} request now: {_carrying(plan)}, sends {whole} ({plan.reason})"]
    after = plan.next
    if after is not None and not after.error and not after.full:
        lines.append(
            f"after a new prompt: {_carrying(after)}, sends the prompt"
            + (f" and {plural(len(after.sent_ids), 'block')} before it" if after.sent_ids else " only")
        )
    return lines


def render_turn(turn: Turn, console: Console, *, title: str | None = None) -> ChainedPlan:
    """Print the table of ``turn``'s blocks and a one-line summary of the chained request; return the plan."""
    plan = chained_plan(turn)
    table = Table(title=title or f"turn {turn.id}", show_lines=False)
    for column, width in (("#", 3), ("kind", 9), ("id", 8), ("turn_id", 8), ("inference_id", 8)):
        table.add_column(column, min_width=width, no_wrap=True)
    table.add_column("response_id", min_width=14, no_wrap=True)
    table.add_column("chained", min_width=8, no_wrap=True)
    table.add_column("text", overflow="fold")
    # A healthy chain's rows say what the server holds (the next request's anchor), not "send" on every one.
    marked = held(plan) or plan
    marks = request_marks(turn, marked.anchor, marked.sent_ids, held=marked is not plan)
    for i, (block, mark) in enumerate(zip(turn.blocks, marks, strict=True)):
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
    else:
        for line in plan_lines(plan, len(turn.blocks)):
            console.print(line)
    return plan
