"""What the Turn inspector and the dashboard show, as JSON: every block with its provenance, each request
that was sent (mode, anchor, the blocks of its delta, input bytes against the stateless equivalent,
fallback), the edits middleware made between snapshots, and the totals over many sessions.

The source is what a store keeps: a session's snapshots and, when recorded, its event log (the
Responses engine's ``final`` events carry the request's mode, anchor, fallback and sent block ids).
A turn file alone has no event log: its requests are then read from the blocks' response tags, and the
anchor each one could have used is worked out by the engine's own rules (marked ``inferred``).
"""

import json
from collections.abc import Sequence
from typing import Any

from ..providers import CACHE_DIAGNOSTICS
from ..session import last_index, session_requests, totals
from ..turns import (
    BLOCK_META_INFERENCE_ID,
    BLOCK_META_MIDDLEWARE,
    BLOCK_META_RESPONSE_ID,
    PAYLOAD_ARGS,
    PAYLOAD_CITATIONS,
    PAYLOAD_ERROR,
    PAYLOAD_ID,
    PAYLOAD_NAME,
    PAYLOAD_RESULT,
    PAYLOAD_SUMMARY,
    TURN_META_HISTORY_EDIT,
    TURN_META_INFERENCE_ID,
    TURN_META_PROVIDER,
    Block,
    BlockKind,
    Turn,
    builtin_of,
    citation_sources,
    result_text,
)
from ._plan import ChainedPlan, chained_plan

__all__ = [
    "ChainedPlan",
    "chained_plan",
    "describe",
    "plural",
    "request_marks",
    "session_report",
    "snapshot_diff",
    "turn_report",
]


def describe(block: Block) -> str:
    """A block as one text: the text, a tool call as ``name(args)``, a result or its error, a provider
    built-in tool's call as ``⚙ tool(input)`` and its result as ``⚙ tool: output`` (or its sources)."""
    p = block.payload
    builtin = builtin_of(block)
    if builtin is not None:
        return _describe_builtin(builtin)
    if block.kind is BlockKind.TOOL_CALL:
        return f"{p.get(PAYLOAD_NAME, '')}({json.dumps(p.get(PAYLOAD_ARGS), ensure_ascii=False)})"
    if block.kind is BlockKind.TOOL_USE:
        error = p.get(PAYLOAD_ERROR)
        return f"error: {error}" if error is not None else result_text(p.get(PAYLOAD_RESULT))
    if block.kind is BlockKind.REASONING and not block.text:
        summary = p.get(PAYLOAD_SUMMARY)
        if isinstance(summary, list):
            summary = " ".join(str(part) for part in summary)
        return str(summary) if summary else "(encrypted)"
    return block.text


def _describe_builtin(info: Any) -> str:
    tool = str(info.get("tool") or info.get("name") or "built-in")
    if info.get("phase") != "result":
        given = info.get("input")
        return f"⚙ {tool}({'' if given is None else json.dumps(given, ensure_ascii=False)})"
    output, sources = info.get("output"), info.get("sources") or []
    if info.get("error"):
        return f"⚙ {tool}: error{'' if output is None else f': {result_text(output)}'}"
    if output is None:
        return f"⚙ {tool}: {plural(len(sources), 'source')}" if sources else f"⚙ {tool}: done"
    return f"⚙ {tool}: {result_text(output)}"


def request_marks(turn: Turn, anchor: str | None, sent: Sequence[str], *, held: bool = False) -> list[str]:
    """Per block: ``anchor`` (the last block of the anchor response), ``send`` (in the delta) or ``""``; with
    ``held``, ``held`` for the blocks before the anchor (the server holds them)."""
    ids = set(sent)
    last_of_anchor = last_index(turn.blocks, anchor)
    before = "held" if held else ""
    return [
        "anchor" if i == last_of_anchor else ("send" if b.id in ids else (before if i < last_of_anchor else ""))
        for i, b in enumerate(turn.blocks)
    ]


def _block_row(i: int, b: Block, mark: str = "") -> dict[str, Any]:
    p = b.payload
    row: dict[str, Any] = {
        "index": i,
        "kind": b.kind.value,
        "role": b.role,
        "id": b.id,
        "turn_id": b.turn_id,
        "inference_id": BLOCK_META_INFERENCE_ID.get(b.metadata),
        "response_id": BLOCK_META_RESPONSE_ID.get(b.metadata),
        "middleware": BLOCK_META_MIDDLEWARE.get(b.metadata),
        "chained": mark or None,
        "text": describe(b),
    }
    if b.kind in (BlockKind.TOOL_CALL, BlockKind.TOOL_USE):
        row["call_id"] = p.get(PAYLOAD_ID)
        row["name"] = p.get(PAYLOAD_NAME)
        row["error"] = p.get(PAYLOAD_ERROR)
    builtin = builtin_of(b)
    if builtin is not None:  # a provider built-in tool's call or result, as the engine typed it
        row["builtin"] = dict(builtin)
    if p.get(PAYLOAD_CITATIONS):  # as the provider sent them, and normalized: the page lists the latter
        row["citations"] = p[PAYLOAD_CITATIONS]
        row["sources"] = citation_sources(p[PAYLOAD_CITATIONS])
    diagnosed = CACHE_DIAGNOSTICS.get(b.metadata)
    if diagnosed:  # the provider's own account of what changed, and whether it agrees with geppetto's
        row["cache_diagnostics"] = dict(diagnosed)
    return row


def turn_report(turn: Turn) -> dict[str, Any]:
    """One Turn as JSON: full ids of every block, its mark, and the chained-request plan."""
    plan = chained_plan(turn)
    marks = request_marks(turn, plan.anchor, plan.sent_ids)
    return {
        "turn_id": turn.id,
        "provider": TURN_META_PROVIDER.get(turn.metadata),
        "blocks": [_block_row(i, b, mark) for i, (b, mark) in enumerate(zip(turn.blocks, marks, strict=True))],
        "chained": plan.to_dict(),
    }


def plural(n: int, word: str) -> str:
    """``1 block``, ``2 blocks``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


# -- snapshots --------------------------------------------------------------------------------------
def _content(b: Block) -> Any:
    return (b.kind.value, b.role, b.payload)


def snapshot_diff(before: Turn | None, after: Turn) -> list[dict[str, Any]]:
    """What changed from one snapshot to the next, besides the blocks the new inference produced:
    blocks inserted, edited (same id, other content), removed, or moved (their order changed)."""
    inference = TURN_META_INFERENCE_ID.get(after.metadata)
    old = {b.id: b for b in before.blocks} if before else {}
    new_ids = {b.id for b in after.blocks}
    changes: list[dict[str, Any]] = []
    for i, b in enumerate(after.blocks):
        prior = old.get(b.id)
        if prior is None:
            if before is not None and BLOCK_META_INFERENCE_ID.get(b.metadata) != inference:
                changes.append({"op": "insert", "index": i, "id": b.id, "kind": b.kind.value, "after": describe(b)})
        elif _content(prior) != _content(b):
            changes.append(
                {
                    "op": "edit",
                    "index": i,
                    "id": b.id,
                    "kind": b.kind.value,
                    "before": describe(prior),
                    "after": describe(b),
                    "middleware": BLOCK_META_MIDDLEWARE.get(b.metadata),
                }
            )
    for b in before.blocks if before else []:
        if b.id not in new_ids:
            changes.append({"op": "remove", "id": b.id, "kind": b.kind.value, "before": describe(b)})
    kept_old = [b.id for b in (before.blocks if before else []) if b.id in new_ids]
    kept_new = [b.id for b in after.blocks if b.id in old]
    if kept_old != kept_new:
        position = {bid: i for i, bid in enumerate(kept_old)}
        moved = [bid for i, bid in enumerate(kept_new) if position[bid] != i]
        changes.append({"op": "move", "ids": moved, "before": kept_old, "after": kept_new})
    return changes


def session_report(
    snapshots: Sequence[Turn],
    events: Sequence[Any] = (),
    *,
    session_id: str | None = None,
    inferences: Sequence[dict[str, Any]] = (),
    seqs: Sequence[int] | None = None,
) -> dict[str, Any]:
    """The inspector's JSON for a session: the last snapshot's blocks, every request, every snapshot's diff.

    ``events`` are a store's recorded events (``RecordedEvent``); without them the requests are inferred
    from the last snapshot's response tags. ``snapshots`` may be a window of the history (``seqs``: their
    numbers, 1 for the first snapshot of the session): each is compared with the one before it in the
    window, so the first shows no changes."""
    requests, errors = session_requests(snapshots, events)
    history = []
    previous: Turn | None = None
    numbers = list(seqs) if seqs is not None else list(range(1, len(snapshots) + 1))
    for seq, t in zip(numbers, snapshots, strict=True):
        history.append(
            {
                "seq": seq,
                "turn_id": t.id,
                "inference_id": TURN_META_INFERENCE_ID.get(t.metadata),
                "blocks": len(t.blocks),
                "changes": snapshot_diff(previous, t),
                "history_edit": TURN_META_HISTORY_EDIT.get(t.metadata),
            }
        )
        previous = t
    report = turn_report(snapshots[-1] if snapshots else Turn(blocks=[]))
    report.update(
        {
            "session_id": session_id,
            "requests": requests,
            "errors": errors,
            "snapshots": history,
            "inferences": list(inferences),
            "totals": totals(requests, errors),
        }
    )
    return report
