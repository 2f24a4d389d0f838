"""Request totals: per session, added up over sessions, and the dashboard over them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = ["REJECTION_FALLBACKS", "add_totals", "dashboard", "totals"]

REJECTION_FALLBACKS = frozenset({"previous_response_not_found", "conversation_not_found", "item_not_found"})
"""Fallback reasons that follow a request the API refused (the engine resent the whole Turn and went on)."""


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
        into = totals([], [])
    # .get: a store's kept summary may predate a key (``conversation``)
    out: dict[str, Any] = {key: into.get(key, 0) + more.get(key, 0) for key in _SUMS}
    for key in _COUNTS:
        merged = Counter(into.get(key) or {})
        merged.update(more.get(key) or {})
        out[key] = dict(merged)
    out["delta_blocks"] = dict(sorted(out["delta_blocks"].items(), key=lambda kv: int(kv[0])))
    return {key: out[key] for key in totals([], [])}


def totals(requests: Sequence[dict[str, Any]], errors: Sequence[dict[str, Any]]) -> dict[str, Any]:
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
    return {"sessions": len(reports), **(merged or totals([], [])), "per_session": rows}
