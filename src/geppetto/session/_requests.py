"""The requests of a session: read from its ``final`` events and the snapshots its inferences saved (mode,
anchor, the blocks of its delta, input bytes against the stateless equivalent, fallback), or, for a Turn
without an event log, inferred from its blocks' response tags by the engine's own planning code.

What a store keeps per session at save time (:func:`inference_totals`) and what the web report and
dashboard show (``geppetto.web``) both come from here: the web package reads them through the internal API
``geppetto.session`` declares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._exceptions import UsageError
from ..turns import (
    BLOCK_META_INFERENCE_ID,
    BLOCK_META_RESPONSE_ID,
    TURN_META_INFERENCE_ID,
    TURN_META_PROVIDER,
    Block,
    Frozen,
    Turn,
)
from ._sizes import Measured
from ._totals import totals

__all__ = ["anchor_field_of", "inference_totals", "last_index", "session_requests", "session_totals"]

_ANCHOR_FIELDS = {"gemini-interactions": "previous_interaction_id"}


def anchor_field_of(provider: str | None) -> str:
    """The request field that names a chained request's anchor on ``provider``'s API."""
    return _ANCHOR_FIELDS.get(provider or "", "previous_response_id")


def last_index(blocks: Sequence[Block], response_id: str | None, end: int | None = None) -> int:
    """The index of the last block of ``response_id`` in ``blocks[:end]``; -1 when there is none."""
    if response_id is not None:
        for i in range(len(blocks) - 1 if end is None else end - 1, -1, -1):
            if BLOCK_META_RESPONSE_ID.get(blocks[i].metadata) == response_id:
                return i
    return -1


def _input_bytes(blocks: Sequence[Block]) -> int:
    """The bytes of ``blocks`` as a request's ``input`` array, compact JSON as the transport sends it."""
    from ..providers.openai_responses import items_bytes

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
        "anchor_index": last_index(context, anchor),
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


def _request_fields(final: dict[str, Any], inference_id: str, index: int) -> dict[str, Any]:
    """A request as its ``final`` event tells it (its blocks and sizes unknown yet)."""
    meta = final.get("metadata") or {}
    extra = meta.get("extra") or {}
    response_id = str(extra.get("response_id") or "")
    mode = extra.get("responses.mode") or "stateless"
    anchor = extra.get("responses.anchor") or None
    return {
        "index": index,
        "inference_id": inference_id,
        "response_id": response_id or None,
        "provider": meta.get("provider"),
        "model": meta.get("model"),
        "mode": mode,
        "anchor": anchor,
        "previous_response_id": anchor if mode == "chained" else None,
        "anchor_field": anchor_field_of(meta.get("provider")),
        "conversation": anchor if mode == "conversation" else None,
        "full": bool(extra.get("responses.full", True)),
        "fallback": extra.get("responses.fallback") or None,
        "fallback_detail": extra.get("responses.detail") or None,
        "why": extra.get("responses.why") or None,
        "repair": extra.get("responses.repair") or None,
        "state_evidence": extra.get("responses.evidence") or None,
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


def _request(snapshot: _Snapshot | None, final: dict[str, Any], inference_id: str, index: int) -> dict[str, Any]:
    """One request from its ``final`` event and the snapshot its inference saved, with the first block of
    each of its responses (None: it saved none)."""
    request = _request_fields(final, inference_id, index)
    first = snapshot[1].get(request["response_id"] or "") if snapshot is not None else None
    if snapshot is None or first is None:
        return request
    blocks, measured = snapshot[0], snapshot[2]
    sizes = request["provider"] in (None, "", "openai")
    recorded = ((final.get("metadata") or {}).get("extra") or {}).get("responses.sent")
    anchor, full = request["anchor"], request["full"]
    if measured is not None:  # a store's summary: only what follows the anchor is looked at
        return _measured_request(request, blocks, measured, first, recorded, sizes=sizes)
    context = list(blocks[:first])
    if isinstance(recorded, list):
        ids = {str(i) for i in recorded}
        sent = [b for b in context if b.id in ids]
    elif full:
        sent = list(context)
    else:  # an older log without the ids: the delta is what follows the anchor's blocks
        sent = context[last_index(context, anchor) + 1 :]
    request.update(_delta(context, sent, anchor, sizes=sizes))
    return request


def _measured_request(
    request: dict[str, Any], blocks: Sequence[Block], measured: Measured, first: int, recorded: Any, *, sizes: bool
) -> dict[str, Any]:
    """``request`` with its delta and sizes from a store's measured snapshot."""
    last = last_index(blocks, request["anchor"], end=first)
    request.update({"context_blocks": first, "anchor_index": last})
    stateless = measured.stateless_bytes(first) if sizes else None
    if request["full"]:  # the whole context went (the ids a full request records are the context's)
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


def _inferred_requests(turn: Turn) -> list[dict[str, Any]]:
    """The requests a Turn's response tags show, each as the engine's planning code would have sent it
    in chained mode, with the usage and cost the engine stamped on each response."""
    from ..pricing import BLOCK_META_USAGE
    from ..providers.openai_responses import plan_chained

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
                "anchor_field": anchor_field_of(TURN_META_PROVIDER.get(turn.metadata)),
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


def session_requests(
    snapshots: Sequence[Turn], events: Sequence[Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
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
    was derived from was measured (see ``geppetto.session._sizes``), not of every block."""
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
    return totals(requests, errors)


def session_totals(
    snapshots: Sequence[Turn], events: Sequence[Any] = (), *, session_id: str | None = None
) -> dict[str, Any]:
    """What :func:`~geppetto.web.dashboard` needs of a session (its id and request totals), without the
    blocks and diffs of :func:`~geppetto.web.session_report`."""
    return {"session_id": session_id, "totals": totals(*session_requests(snapshots, events))}
