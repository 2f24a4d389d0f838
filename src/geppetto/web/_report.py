"""What the Turn inspector and the dashboard show, as JSON: every block with its provenance, each request
that was sent (mode, anchor, the blocks of its delta, input bytes against the stateless equivalent,
fallback), the edits middleware made between snapshots, and the totals over many sessions.

The source is what a store keeps: a session's snapshots and, when recorded, its event log (the
Responses engine's ``final`` events carry the request's mode, anchor, fallback and sent block ids).
A turn file alone has no event log: its requests are then read from the blocks' response tags, and the
anchor each one could have used is worked out by the engine's own rules (marked ``inferred``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .._exceptions import UsageError
from ..turns import (
    BLOCK_META_INFERENCE_ID,
    BLOCK_META_MIDDLEWARE,
    BLOCK_META_RESPONSE_ID,
    PAYLOAD_ARGS,
    PAYLOAD_ERROR,
    PAYLOAD_ID,
    PAYLOAD_NAME,
    PAYLOAD_RESULT,
    PAYLOAD_SUMMARY,
    TURN_META_INFERENCE_ID,
    TURN_META_PROVIDER,
    Block,
    BlockKind,
    Turn,
    result_text,
)
from ..turns._cow import Frozen
from ..turns._known import TURN_META_HISTORY_EDIT
from ._sizes import Measured

__all__ = [
    "ChainedPlan",
    "add_totals",
    "chained_plan",
    "dashboard",
    "describe",
    "inference_totals",
    "plural",
    "request_marks",
    "session_report",
    "session_totals",
    "turn_report",
]

REJECTION_FALLBACKS = frozenset({"previous_response_not_found", "conversation_not_found", "item_not_found"})
"""Fallback reasons that follow a request the API refused (the engine resent the whole Turn and went on)."""


@dataclass(frozen=True)
class ChainedPlan:
    """What the Responses engine would send for this turn, worked out by its own planning code
    (``_plan.plan_request``) in the mode the Turn asks for (``mode``; ``stateless`` while the kill switch
    is off; a stateless Turn is shown as chained would send it): ``anchor`` is the ``previous_response_id``
    the request carries (None: none), ``sent_ids`` the ids of the blocks it sends, ``full`` whether they are the whole Turn, ``reason`` why
    the whole Turn goes (or why nothing can be sent: then ``error`` is set and ``sent_ids`` is empty).
    ``next`` is the plan after one more user prompt (its ``sent_ids`` without that prompt), None for
    that plan itself."""

    anchor: str | None
    sent_ids: list[str]
    reason: str = ""
    mode: str = "chained"
    conversation: str | None = None
    full: bool = False
    fallback: str = ""
    error: bool = False
    next: ChainedPlan | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mode": self.mode,
            "anchor": self.anchor,
            "conversation": self.conversation,
            "sends": self.sent_ids,
            "full": self.full,
            "fallback": self.fallback or None,
            "reason": self.reason or None,
            "error": self.error,
        }
        if self.next is not None:
            out["next"] = self.next.to_dict()
        return out


def _engine_plan(turn: Turn) -> ChainedPlan:
    from ..providers.openai_responses._plan import plan_request
    from ..providers.openai_responses._state import get_state
    from ..providers.openai_responses._switch import CHAINING_ENV, chaining_enabled

    state = get_state(turn)
    mode = state.mode if state is not None and state.mode != "stateless" else "chained"
    off = ""
    try:
        if not chaining_enabled():
            mode, off = "stateless", f"chaining is off ({CHAINING_ENV}=off)"
    except UsageError as exc:
        return ChainedPlan(None, [], str(exc), mode, error=True)
    try:
        plan = plan_request(turn, mode, state, include_system=True)
    except UsageError as exc:
        return ChainedPlan(None, [], str(exc), mode, error=True)
    reason = off or plan.detail or plan.why  # why: a re-anchoring or a conversation repaired in place
    if plan.full and not reason:
        reason = "the first request of a chain" if mode == "chained" else "a new conversation"
    return ChainedPlan(
        plan.previous_response_id,
        [b.id for b in plan.blocks],
        reason,
        mode,
        plan.conversation_id,
        plan.full,
        plan.fallback,
    )


def chained_plan(turn: Turn) -> ChainedPlan:
    """What the engine would send for ``turn`` now, and after one more prompt (``next``), by the engine's
    own planning code: with nothing after the anchor it sends the whole Turn, never an empty input."""
    now = _engine_plan(turn)
    ahead = turn.clone()
    prompt = Block.user("(the next prompt)")
    ahead.append(prompt)
    after = _engine_plan(ahead)
    return replace(now, next=replace(after, sent_ids=[i for i in after.sent_ids if i != prompt.id]))


def describe(block: Block) -> str:
    """A block as one text: the text, a tool call as ``name(args)``, a result or its error."""
    p = block.payload
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


def _last_index(blocks: Sequence[Block], response_id: str | None, end: int | None = None) -> int:
    """The index of the last block of ``response_id`` in ``blocks[:end]``; -1 when there is none."""
    if response_id is not None:
        for i in range(len(blocks) - 1 if end is None else end - 1, -1, -1):
            if BLOCK_META_RESPONSE_ID.get(blocks[i].metadata) == response_id:
                return i
    return -1


def request_marks(turn: Turn, anchor: str | None, sent: Sequence[str]) -> list[str]:
    """Per block: ``anchor`` (the last block of the anchor response), ``send`` (in the delta) or ``""``."""
    ids = set(sent)
    last_of_anchor = _last_index(turn.blocks, anchor)
    return ["anchor" if i == last_of_anchor else ("send" if b.id in ids else "") for i, b in enumerate(turn.blocks)]


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


# -- requests ---------------------------------------------------------------------------------------
def _input_bytes(blocks: Sequence[Block]) -> int:
    """The bytes of ``blocks`` as a request's ``input`` array, compact JSON as the transport sends it."""
    from ..providers.openai_responses._items import items_bytes

    return items_bytes(blocks, include_system=True)


def _first_blocks(blocks: Sequence[Block]) -> dict[str, int]:
    """Each response id of the blocks and the index of its first block, in the order they first appear."""
    first: dict[str, int] = {}
    for i, b in enumerate(blocks):
        rid = BLOCK_META_RESPONSE_ID.get(b.metadata)
        if rid:
            first.setdefault(rid, i)
    return first


def _delta(context: Sequence[Block], sent: Sequence[Block], anchor: str | None, *, sizes: bool) -> dict[str, Any]:
    """A request's blocks: the ids it sent, the Turn it was sent for (``context``), where its anchor ends,
    and (``sizes``) the input bytes of both."""
    fields: dict[str, Any] = {
        "sent": [b.id for b in sent],
        "context_blocks": len(context),
        "anchor_index": _last_index(context, anchor),
    }
    if sizes:
        fields["input_bytes"] = _input_bytes(sent)
        fields["stateless_bytes"] = _input_bytes(context)
    return fields


_Snapshot = tuple[Sequence[Block], dict[str, int], "Measured | None"]
"""A saved snapshot's blocks, the first block of each of its responses, and its measure when a store has one."""


def _firsts(blocks: Sequence[Block], wanted: set[str]) -> dict[str, int]:
    """The index of the first block of each response id in ``wanted``, looking at every block."""
    found: dict[str, int] = {}
    if wanted - {""}:
        key = str(BLOCK_META_RESPONSE_ID)  # the raw key: one dict lookup a block
        for i, b in enumerate(blocks):
            rid = b.metadata.get(key)
            if rid in wanted and rid not in found:
                found[rid] = i
    return found


def _request(snapshot: _Snapshot | None, final: dict[str, Any], inference_id: str, index: int) -> dict[str, Any]:
    """One request from its ``final`` event and the snapshot its inference saved, with the first block of
    each of its responses (None: it saved none)."""
    meta = final.get("metadata") or {}
    extra = meta.get("extra") or {}
    response_id = str(extra.get("response_id") or "")
    mode = extra.get("responses.mode") or "stateless"
    anchor = extra.get("responses.anchor") or None
    full = bool(extra.get("responses.full", True))
    request: dict[str, Any] = {
        "index": index,
        "inference_id": inference_id,
        "response_id": response_id or None,
        "provider": meta.get("provider"),
        "model": meta.get("model"),
        "mode": mode,
        "anchor": anchor,
        "previous_response_id": anchor if mode == "chained" else None,
        "conversation": anchor if mode == "conversation" else None,
        "full": full,
        "fallback": extra.get("responses.fallback") or None,
        "fallback_detail": extra.get("responses.detail") or None,
        "why": extra.get("responses.why") or None,
        "repair": extra.get("responses.repair") or None,
        "items": extra.get("responses.items"),
        "usage": meta.get("usage"),
        "cost": (meta.get("cost") or {}).get("total"),
        "uncached_cost": (meta.get("cost") or {}).get("uncached"),
        "stop_reason": meta.get("stop_reason"),
        "inferred": False,
        "sent": None,
        "input_bytes": None,
        "stateless_bytes": None,
    }
    first = snapshot[1].get(response_id) if snapshot is not None else None
    if snapshot is None or first is None:
        return request
    blocks, measured = snapshot[0], snapshot[2]
    sizes = meta.get("provider") in (None, "", "openai")
    recorded = extra.get("responses.sent")
    if measured is not None:  # a store's summary: only what follows the anchor is looked at
        last = _last_index(blocks, anchor, end=first)
        request.update({"context_blocks": first, "anchor_index": last})
        stateless = measured.stateless_bytes(first) if sizes else None
        if full:  # the whole context went (the ids a full request records are the context's)
            request.update({"input_bytes": stateless, "stateless_bytes": stateless})
            return request
        sent = list(blocks[last + 1 : first])
        if isinstance(recorded, list):
            ids = {str(i) for i in recorded}
            sent = [b for b in sent if b.id in ids]
            if len(sent) < len(ids):  # some went from before the anchor: look at every block
                sent = [b for b in blocks[:first] if b.id in ids]
        request["sent"] = [b.id for b in sent]
        if sizes:
            request.update({"input_bytes": _input_bytes(sent), "stateless_bytes": stateless})
        return request
    context = list(blocks[:first])
    if isinstance(recorded, list):
        ids = {str(i) for i in recorded}
        sent = [b for b in context if b.id in ids]
    elif full:
        sent = list(context)
    else:  # an older log without the ids: the delta is what follows the anchor's blocks
        sent = context[_last_index(context, anchor) + 1 :]
    request.update(_delta(context, sent, anchor, sizes=sizes))
    return request


def _inferred_requests(turn: Turn) -> list[dict[str, Any]]:
    """The requests a Turn's response tags show, each as the engine's planning code would have sent it
    in chained mode, with the usage and cost the engine stamped on each response."""
    from ..pricing import BLOCK_META_USAGE
    from ..providers.openai_responses._plan import plan_chained

    stamps: dict[str, dict[str, Any]] = {}  # the usage and cost the engine stamped on each response's last block
    for b in turn.blocks:
        stamp = BLOCK_META_USAGE.get(b.metadata)
        if stamp is not None:
            stamps[str(BLOCK_META_RESPONSE_ID.get(b.metadata) or "")] = stamp
    requests: list[dict[str, Any]] = []
    for rid, first in _first_blocks(turn.blocks).items():
        stamp = stamps.get(rid) or {}
        cost = stamp.get("cost") or {}
        context = turn.blocks[:first]
        prefix = Turn(blocks=list(context), id=turn.id, metadata=turn.metadata)
        try:
            plan = plan_chained(prefix, None, include_system=True, metrics=None)
        except UsageError:  # pending tool calls before it: not a request the engine would send
            continue
        anchor = plan.previous_response_id
        sent = plan.blocks
        requests.append(
            {
                "index": len(requests),
                "inference_id": BLOCK_META_INFERENCE_ID.get(turn.blocks[first].metadata),
                "response_id": rid,
                "mode": plan.mode,
                "anchor": anchor,
                "previous_response_id": anchor,
                "conversation": None,
                "full": plan.full,
                "fallback": plan.fallback or None,
                "usage": stamp.get("usage"),
                "cost": cost.get("total"),
                "uncached_cost": cost.get("uncached"),
                "inferred": True,
                **_delta(context, sent, anchor, sizes=True),
            }
        )
    return requests


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
    requests, errors = _requests(snapshots, events)
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
            "totals": _totals(requests, errors),
        }
    )
    return report


def session_totals(
    snapshots: Sequence[Turn], events: Sequence[Any] = (), *, session_id: str | None = None
) -> dict[str, Any]:
    """What :func:`dashboard` needs of a session (its id and request totals), without the blocks and diffs
    of :func:`session_report`."""
    return {"session_id": session_id, "totals": _totals(*_requests(snapshots, events))}


def _requests(snapshots: Sequence[Turn], events: Sequence[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The session's requests (from the ``final`` events, else inferred from the last snapshot) and errors."""
    by_inference: dict[str | None, _Snapshot] = {
        TURN_META_INFERENCE_ID.get(t.metadata): (t.blocks, _first_blocks(t.blocks), None) for t in snapshots
    }
    requests: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for event in events:
        data = event.event
        if event.type == "final":
            requests.append(_request(by_inference.get(event.inference_id), data, event.inference_id, len(requests)))
        elif event.type == "error":
            errors.append(
                {
                    "inference_id": event.inference_id,
                    "message": data.get("message"),
                    "error_type": data.get("error_type"),
                }
            )
    if not events and snapshots:
        requests = _inferred_requests(snapshots[-1])
    return requests, errors


def inference_totals(blocks: Sequence[Block] | Frozen | None, events: Sequence[Any]) -> dict[str, Any]:
    """The totals one inference adds to its session's (what a store keeps per session at save time):
    its ``final`` and ``error`` events, its requests measured against ``blocks``, the snapshot it saved
    (None: it saved none). Adding these up with :func:`add_totals` gives :func:`session_totals`.

    Given the snapshot as a store's frozen versions, the cost is that of what changed since a snapshot it
    was derived from was measured (see ``geppetto.web._sizes``), not of every block."""
    finals = [e for e in events if e.type == "final"]
    wanted = {str(((e.event.get("metadata") or {}).get("extra") or {}).get("response_id") or "") for e in finals}
    snapshot: _Snapshot | None = None
    if isinstance(blocks, Frozen):
        measured = Measured(blocks)
        snapshot = (measured.blocks, measured.firsts(wanted), measured)
    elif blocks is not None:
        snapshot = (blocks, _firsts(blocks, wanted), None)
    requests = [_request(snapshot, e.event, e.inference_id, 0) for e in finals]
    errors = [
        {"inference_id": e.inference_id, "message": e.event.get("message"), "error_type": e.event.get("error_type")}
        for e in events
        if e.type == "error"
    ]
    return _totals(requests, errors)


_COUNTS = ("modes", "fallback_reasons", "delta_blocks", "rejection_types")
_SUMS = (
    "requests",
    "chained",
    "conversation",
    "stateless",
    "fallbacks",
    "input_bytes",
    "stateless_bytes",
    "bytes_saved",
    "rejections",
    "input_tokens",
    "cached_tokens",
    "cache_write_tokens",
    "output_tokens",
    "cost",
    "uncached_cost",
    "unpriced_requests",
)


def add_totals(into: dict[str, Any] | None, more: dict[str, Any]) -> dict[str, Any]:
    """The sum of two totals of :func:`session_totals` (``into`` None: ``more`` alone), as a new dict."""
    if into is None:
        into = _totals([], [])
    # .get: a store's kept summary may predate a key (``conversation``)
    out: dict[str, Any] = {key: into.get(key, 0) + more.get(key, 0) for key in _SUMS}
    for key in _COUNTS:
        merged = Counter(into.get(key) or {})
        merged.update(more.get(key) or {})
        out[key] = dict(merged)
    out["delta_blocks"] = dict(sorted(out["delta_blocks"].items(), key=lambda kv: int(kv[0])))
    return {key: out[key] for key in _totals([], [])}


def _totals(requests: Sequence[dict[str, Any]], errors: Sequence[dict[str, Any]]) -> dict[str, Any]:
    modes = Counter(r["mode"] for r in requests)
    fallbacks = Counter(r["fallback"] for r in requests if r.get("fallback"))
    sent = sum(r["input_bytes"] or 0 for r in requests if r.get("stateless_bytes") is not None)
    stateless = sum(r["stateless_bytes"] or 0 for r in requests)
    deltas = Counter(len(r["sent"]) for r in requests if r.get("sent") is not None and not r.get("full"))
    rejections = Counter(e["error_type"] or "error" for e in errors)
    rejections.update(code for code in fallbacks.elements() if code in REJECTION_FALLBACKS)
    usages = [r.get("usage") or {} for r in requests]
    return {
        "requests": len(requests),
        "input_tokens": sum(int(u.get("input_tokens") or 0) for u in usages),
        "cached_tokens": sum(int(u.get("cached_tokens") or 0) for u in usages),
        "cache_write_tokens": sum(int(u.get("cache_write_tokens") or 0) for u in usages),
        "output_tokens": sum(int(u.get("output_tokens") or 0) for u in usages),
        "cost": sum(r.get("cost") or 0.0 for r in requests),
        "uncached_cost": sum(r.get("uncached_cost") or 0.0 for r in requests),
        "unpriced_requests": sum(1 for r in requests if r.get("cost") is None),
        "modes": dict(modes),
        # chained: a delta after previous_response_id; conversation: any request that named a server
        # conversation (its first sends the whole Turn); stateless: the whole Turn, no conversation, no fallback
        "chained": sum(1 for r in requests if not r.get("full") and r["mode"] != "conversation"),
        "conversation": modes.get("conversation", 0),
        "stateless": sum(
            1 for r in requests if r.get("full") and not r.get("fallback") and r["mode"] != "conversation"
        ),
        "fallbacks": sum(fallbacks.values()),
        "fallback_reasons": dict(fallbacks),
        "delta_blocks": {str(k): v for k, v in sorted(deltas.items())},
        "input_bytes": sent,
        "stateless_bytes": stateless,
        "bytes_saved": stateless - sent,
        "rejections": sum(rejections.values()),
        "rejection_types": dict(rejections),
    }


def dashboard(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The totals over many sessions (:func:`session_totals` or :func:`session_report`, or a store's
    kept summary), and one row per session (for the plot)."""
    merged: dict[str, Any] | None = None
    rows = []
    for report in reports:
        merged = add_totals(merged, report["totals"])
        rows.append(
            {"session_id": report.get("session_id"), "first_prompt": report.get("first_prompt"), **report["totals"]}
        )
    return {"sessions": len(reports), **(merged or _totals([], [])), "per_session": rows}
