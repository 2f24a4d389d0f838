"""Deciding what a request sends: anchor + delta, conversation + delta, or the whole Turn."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from geppetto.turns import Block, Turn

from ._anchors import blocks_after_response, scan_anchors
from ._items import blocks_to_items
from ._metrics import metrics

__all__ = ["CONVERSATION_ITEMS_PER_CALL", "Plan", "plan_chained", "plan_conversation", "plan_full", "seed_split"]

log = logging.getLogger("geppetto.providers.openai_responses")

CONVERSATION_ITEMS_PER_CALL = 20
"""The Conversations API takes at most 20 items per create / add-items call."""


@dataclass
class Plan:
    """One request's shape. ``seed_items`` go into a new conversation before the request is sent."""

    mode: str
    items: list[dict[str, Any]]
    previous_response_id: str | None = None
    conversation_id: str | None = None
    seed_items: list[dict[str, Any]] | None = None
    fallback_reason: str = ""
    delta_blocks: list[Block] = field(default_factory=list)


def plan_full(turn: Turn, *, include_system: bool, reason: str = "") -> Plan:
    """Stateless: the whole Turn, no server state."""
    return Plan("stateless", blocks_to_items(turn.blocks, include_system=include_system), fallback_reason=reason)


def _timed_scan(turn: Turn, include_system: bool) -> Any:
    start = time.perf_counter()
    scan = scan_anchors(turn, include_system=include_system)
    metrics.anchor_time(time.perf_counter() - start)
    return scan


def plan_chained(turn: Turn, *, include_system: bool) -> Plan:
    """Anchor + delta when a valid anchor exists, else the whole Turn with the reason."""
    scan = _timed_scan(turn, include_system)
    anchor = scan.best()
    if anchor is None:
        reason = scan.reason()
        if scan.spans:
            log.warning("responses: no valid anchor (%s); sending the whole Turn", reason)
        else:
            log.debug("responses: no response in the Turn yet; sending the whole Turn")
        return plan_full(turn, include_system=include_system, reason=reason)
    delta = blocks_after_response(turn, anchor)
    items = blocks_to_items(delta, include_system=include_system)
    log.debug("responses: anchor %s, %d delta blocks, %d items", anchor, len(delta), len(items))
    return Plan("chained", items, previous_response_id=anchor, delta_blocks=delta)


def seed_split(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split a whole Turn's items into (conversation seed, request input): the last item goes in the
    request, together with the reasoning items right before it (a pair is never split)."""
    k = max(0, len(items) - 1)
    while k > 0 and items[k - 1].get("type") == "reasoning":
        k -= 1
    return items[:k], items[k:]


def plan_conversation(
    turn: Turn, conversation_id: str | None, last_response_id: str | None, *, include_system: bool
) -> Plan:
    """Conversation + delta when the conversation still matches the Turn, else a new seeded conversation."""
    if conversation_id and last_response_id:
        scan = _timed_scan(turn, include_system)
        if scan.valid(last_response_id):
            delta = blocks_after_response(turn, last_response_id)
            items = blocks_to_items(delta, include_system=include_system)
            log.debug("responses: conversation %s after %s, %d items", conversation_id, last_response_id, len(items))
            return Plan("conversation", items, conversation_id=conversation_id, delta_blocks=delta)
        reason = f"conversation {conversation_id} no longer matches the Turn ({scan.reason()})"
        log.warning("responses: %s; starting a new conversation", reason)
    else:
        reason = ""
    seed, items = seed_split(blocks_to_items(turn.blocks, include_system=include_system))
    return Plan("conversation", items, seed_items=seed, fallback_reason=reason, delta_blocks=list(turn.blocks))
