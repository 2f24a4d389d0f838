"""Claude's cache diagnostics (``ClaudeEngine(..., cache_diagnostics=True)``), checked against geppetto's record.

Every request sends ``diagnostics: {"previous_message_id": <the Turn's previous Claude answer, or null>}``
(the object is the opt-in: Claude keeps a fingerprint only of requests that carry it). The answer's
``diagnostics`` (on the Message; on ``message_start`` in a stream) names the first place the request
diverged from the earlier one: ``model_changed``, ``system_changed``, ``tools_changed`` or
``messages_changed``, with ``cache_missed_input_tokens``; ``null`` when nothing diverged.

geppetto keeps its own fingerprint of each request it sent (:data:`REQUEST_FINGERPRINT` on the answer's
blocks: the model, digests of the tools and system prompt without ``cache_control``, the number of
messages and a digest of them), so after the answer it knows what it changed itself, and
:func:`~geppetto.providers._disagreements.record_verdict` keeps both on the answer's blocks and reports a
disagreement. The fingerprint holds digests only, a few hundred bytes per answer.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ...turns import Block, Turn, block_meta_key
from .._disagreements import record_verdict
from ._binding import _bare, _canon, _system_list

__all__ = ["REQUEST_FINGERPRINT", "ask_diagnostics", "check_diagnostics"]

REQUEST_FINGERPRINT = block_meta_key("anthropic", "request_fingerprint", 1, dict)
"""On the blocks of an answer asked with diagnostics: ``{"id": the answer's id, "model", "tools", "system":
digests, "messages": how many, "prefix": digest of those messages}`` of the request that produced it."""

_PARTS = ("model", "tools", "system", "messages")
_INCONCLUSIVE = ("previous_message_not_found", "unavailable")


def _messages_digests(messages: list[dict[str, Any]], kept: int) -> tuple[str, str]:
    """The digest of the first ``kept`` messages and of them all, in one pass."""
    h = hashlib.sha256()
    first = h.hexdigest() if kept == 0 else ""
    for index, message in enumerate(messages, start=1):
        content = message.get("content")
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        h.update(_canon([message.get("role"), [_bare(p) for p in parts]]) + b"\n")
        if index == kept:
            first = h.hexdigest()
    return first, h.hexdigest()


def _digest(value: Any) -> str:
    return hashlib.sha256(_canon(value)).hexdigest()


def fingerprint(body: dict[str, Any], message_id: str, kept: int = 0) -> tuple[dict[str, Any], str]:
    """geppetto's fingerprint of the request ``body`` whose answer is ``message_id``, and the digest of its
    first ``kept`` messages ("" when it has fewer)."""
    messages = body.get("messages") or []
    first, whole = _messages_digests(messages, kept)
    mark = {
        "id": message_id,
        "model": str(body.get("model")),
        "tools": _digest(_bare(body.get("tools") or [])),
        "system": _digest(_bare(_system_list(body.get("system")))),
        "messages": len(messages),
        "prefix": whole,
    }
    return mark, first


def _previous(turn: Turn, before: int) -> dict[str, Any] | None:
    for block in reversed(turn.blocks[:before]):
        found = REQUEST_FINGERPRINT.get(block.metadata)
        if found:
            return found
    return None


def ask_diagnostics(turn: Turn, body: dict[str, Any]) -> None:
    """Add ``diagnostics`` to ``body``, naming the Turn's previous answer asked with diagnostics."""
    previous = _previous(turn, len(turn.blocks))
    body["diagnostics"] = {"previous_message_id": previous["id"] if previous else None}


def _changed(previous: dict[str, Any], now: dict[str, Any], first: str) -> list[str]:
    """What changed from the request ``previous`` to ``now`` (``first``: the digest of ``now``'s first
    messages, as many as ``previous`` had)."""
    changed = [p for p in _PARTS[:3] if previous[p] != now[p]]
    if first != previous["prefix"]:
        changed.append("messages")
    return changed


def _verdict(reported: Any, answered: bool, expected: list[str]) -> tuple[str, str]:
    """The verdict on the provider's ``reported`` diagnostics, and what it said in words."""
    if not answered:
        return "inconclusive", "nothing (the answer carried no diagnostics)"
    if reported is None:
        return ("agree" if not expected else "disagree"), "nothing diverged"
    reason = reported.get("cache_miss_reason") if isinstance(reported, dict) else None
    kind = reason.get("type") if isinstance(reason, dict) else None
    if not isinstance(kind, str):
        return "inconclusive", "its comparison had not finished"
    if kind in _INCONCLUSIVE or not kind.endswith("_changed"):
        return "inconclusive", kind
    part = kind.removesuffix("_changed")
    return ("agree" if part in expected else "disagree"), f"{part} changed first"


def check_diagnostics(
    turn: Turn, body: dict[str, Any], new: list[Block], message_id: str, reported: Any, answered: bool, model: str
) -> None:
    """After the answer ``new`` (``message_id``) to ``body``: keep geppetto's fingerprint of the request on
    it, compare what the provider ``reported`` with what geppetto changed since the request it named, and
    keep the verdict (``answered``: whether the answer carried ``diagnostics`` at all)."""
    asked = body.get("diagnostics")
    previous_id = asked.get("previous_message_id") if isinstance(asked, dict) else None
    start = len(turn.blocks) - len(new)
    previous = _previous(turn, start) if previous_id else None
    if previous is not None and previous.get("id") != previous_id:
        previous = None
    mark, first = fingerprint(body, message_id, int(previous["messages"]) if previous is not None else 0)
    if previous_id is None:
        expected: list[str] = []
        verdict, said = ("agree", "") if answered and reported is None else ("inconclusive", "")
    elif previous is None:
        expected, verdict, said = [], "inconclusive", "geppetto holds no fingerprint of the earlier request"
    else:
        expected = _changed(previous, mark, first)
        verdict, said = _verdict(reported, answered, expected)
    record_verdict(
        turn,
        new,
        provider="anthropic",
        model=model,
        previous=previous_id,
        reported=reported,
        expected=expected,
        verdict=verdict,
        said=said,
    )
    if message_id:
        for block in new:
            REQUEST_FINGERPRINT.set(block.metadata, dict(mark))
