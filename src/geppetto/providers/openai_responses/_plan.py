"""Deciding what a request sends: anchor + delta, conversation + delta, or the whole Turn.

A plan never sends an empty ``input``: with nothing after the anchor (provider-apis §2.3 leaves the
API's behaviour open; seed 000 lists it as a fallback case) the whole Turn is sent instead, so every
mode gives the model the same context; a Turn whose last response asked for tools that have no
results yet is refused with a ``UsageError`` naming the fix, since the server would reject it anyway.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from geppetto.tools._executor import require_tool_results
from geppetto.turns import Block, Turn

from .._chain import REASON_TEXT, AnchorScan, blocks_after_response, timed_scan
from .._stateful import ResponsesMetrics
from ._anchors import chain_seed, scan_anchors
from ._items import blocks_to_items, replayed
from ._state import ConversationState

__all__ = [
    "CONVERSATION_ITEMS_PER_CALL",
    "Plan",
    "plan_chained",
    "plan_conversation",
    "plan_full",
    "plan_new_conversation",
    "plan_request",
    "plan_stateless",
    "seed_split",
]

log = logging.getLogger("geppetto.providers.openai_responses")

CONVERSATION_ITEMS_PER_CALL = 20
"""The Conversations API takes at most 20 items per create / add-items call."""


@dataclass
class Plan:
    """One request's shape.

    ``mode`` is how the request carries the context (``chained``: ``previous_response_id``;
    ``conversation``; ``stateless``: neither). ``blocks`` are the blocks whose items are sent;
    ``full`` says they are the whole Turn. ``seed_items`` go into a conversation before the request
    is sent: into ``reuse_conversation`` when that one turns out to be empty, else into a new one.
    ``fallback`` is a reason code when server state could have been used but was not (``detail``
    says why, for the log). ``base`` is the ``ConversationState.base`` to record afterwards.
    ``created`` is set once sending made a new conversation for the request; ``replaced`` then names the
    conversation it took the place of (one that still exists on the server, holding other context).
    ``repair`` names the response a conversation is repaired back to before sending (its items after that
    response's are deleted; ``_repair``); ``deleted`` counts the items that took. ``why`` says why this
    anchor, repair or whole Turn was chosen (the inspector shows it).
    ``stale`` names the reasoning blocks the prefix guard left out of ``items``.
    """

    mode: str
    items: list[dict[str, Any]]
    blocks: list[Block] = field(default_factory=list)
    full: bool = False
    previous_response_id: str | None = None
    conversation_id: str | None = None
    seed_items: list[dict[str, Any]] | None = None
    reuse_conversation: str | None = None
    fallback: str = ""
    detail: str = ""
    base: str | None = None
    prefix: Any = None
    created: bool = False
    replaced: str | None = None
    repair: str | None = None
    deleted: int = 0
    why: str = ""
    stale: frozenset[str] = frozenset()
    """Ids of the reasoning blocks the prefix guard left out (their prefix changed since they were made)."""
    evidence: str = ""
    """What decided that the server used (or ignored) the stored context, when its answer did not echo it
    (``kept (usage: ...)``); empty when the echo proved it or nothing was chained."""

    def seed(self) -> str:
        """The fingerprint seed of the server object that holds this request's context."""
        state = ConversationState(mode="chained", conversation_id=self.conversation_id, base=self.base)
        return chain_seed(state, "conversation" if self.mode == "conversation" else "chained")


def plan_full(turn: Turn, *, include_system: bool, fallback: str = "", detail: str = "", prefix: Any = None) -> Plan:
    """Stateless: the whole Turn (from its latest server compaction), no server state."""
    blocks = replayed(turn.blocks)
    items = blocks_to_items(blocks, include_system=include_system)
    return Plan("stateless", items, blocks, True, fallback=fallback, detail=detail, prefix=prefix)


def plan_stateless(turn: Turn, state: ConversationState | None, *, include_system: bool) -> Plan:
    """Stateless with a stored response: the whole Turn, and the prefix its response's fingerprint extends
    from the Turn's incremental proof (as a chained request keeps it), so a Turn that goes on statelessly
    hashes only the blocks added since its last request, not every block again on each response."""
    scan = scan_anchors(turn, include_system=include_system, seed=chain_seed(state, "chained"), incremental=True)
    return plan_full(turn, include_system=include_system, prefix=scan.hasher)


def _timed_scan(turn: Turn, include_system: bool, seed: str, metrics: ResponsesMetrics | None) -> AnchorScan:
    def run() -> AnchorScan:
        return scan_anchors(turn, include_system=include_system, seed=seed, incremental=True)

    return timed_scan(run, metrics, log=log, label="responses")


def _delta(turn: Turn, anchor: str, include_system: bool) -> tuple[list[Block], list[dict[str, Any]]]:
    delta = blocks_after_response(turn, anchor)
    items = blocks_to_items(delta, include_system=include_system)
    if not items:
        require_tool_results(turn)
    return delta, items


def plan_chained(
    turn: Turn, state: ConversationState | None, *, include_system: bool, metrics: ResponsesMetrics | None
) -> Plan:
    """Anchor + delta when a valid anchor exists; else the whole Turn (after ``state.base`` for a
    fresh Turn), with a reason code when that is a fallback."""
    base = state.base if state else None
    scan = _timed_scan(turn, include_system, chain_seed(state, "chained"), metrics)
    anchor = scan.best()
    if anchor is not None:
        delta, items = _delta(turn, anchor, include_system)
        if items:
            log.debug("responses: anchor %s, %d delta blocks, %d items", anchor, len(delta), len(items))
            plan = Plan("chained", items, delta, previous_response_id=anchor, base=base, prefix=scan.hasher)
            latest = scan.latest_id
            if latest is not None and latest != anchor:
                plan.why = (
                    f"re-anchored on {anchor}, the latest response whose prefix still matches the Turn "
                    f"(the latest response, {latest}: {REASON_TEXT[scan.spans[latest].problem() or 'fingerprint_mismatch']})"
                )
            return plan
        code, detail = "empty_delta", f"nothing after anchor {anchor} to send"
    elif not scan.spans:
        code, detail = "", ""
        if state is not None and state.previous_response_id and not base:
            log.info(
                "responses: the Turn's state names previous_response_id %s but no block comes from a response: "
                "sending the whole Turn (to send only new blocks after it, set ConversationState(base=...) "
                "or use ConversationManager)",
                state.previous_response_id,
            )
    else:
        code, detail = scan.reason_code() or "fingerprint_mismatch", f"no valid anchor ({scan.reason()})"
    if base:
        blocks = replayed(turn.blocks)
        items = blocks_to_items(blocks, include_system=include_system)
        return Plan("chained", items, blocks, True, base, base=base, fallback=code, detail=detail, prefix=scan.hasher)
    return plan_full(turn, include_system=include_system, fallback=code, detail=detail, prefix=scan.hasher)


def seed_split(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split a whole Turn's items into (conversation seed, request input): the last item goes in the
    request, together with the reasoning items right before it (a pair is never split)."""
    k = max(0, len(items) - 1)
    while k > 0 and items[k - 1].get("type") in ("reasoning", "item_reference"):
        k -= 1
    return items[:k], items[k:]


def plan_new_conversation(
    turn: Turn, *, include_system: bool, fallback: str = "", detail: str = "", reuse: str | None = None
) -> Plan:
    """The whole Turn in a conversation made for it: seeded with all but the last item, which is the
    request's input. ``reuse`` names a conversation to seed instead, if it turns out to be empty."""
    blocks = replayed(turn.blocks)
    seed, items = seed_split(blocks_to_items(blocks, include_system=include_system))
    plan = Plan("conversation", items, blocks, True, seed_items=seed, fallback=fallback, detail=detail)
    plan.reuse_conversation = reuse
    return plan


def _mismatch_code(scan: AnchorScan, last: str | None) -> str:
    if last and last in scan.spans:
        return scan.spans[last].problem() or "fingerprint_mismatch"
    if last:
        return "response_incomplete"  # every block of the conversation's last response is gone
    return scan.reason_code() or "fingerprint_mismatch"


def _plan_repair(
    turn: Turn, scan: AnchorScan, cid: str, last: str | None, base: str | None, include_system: bool
) -> Plan | None:
    """Conversation ``cid`` repaired in place: when a response answered in it still anchors the Turn but its
    last one does not (an edit, insertion or removal after that response), the items after the anchor's
    are deleted from the conversation before the request and only the blocks after it are sent. None when
    no response of the conversation anchors (the divergence is before everything it holds)."""
    anchor = scan.best()
    if anchor is None or anchor == last:
        return None
    delta, items = _delta(turn, anchor, include_system)
    if not items:
        return None
    why = REASON_TEXT.get(_mismatch_code(scan, last), "it no longer matches the Turn")
    plan = Plan("conversation", items, delta, conversation_id=cid, base=base, prefix=scan.hasher)
    plan.repair = anchor
    plan.why = (
        f"the Turn changed after response {anchor} (the latest response, {last or 'none'}: {why}): conversation "
        f"{cid} is repaired in place, its items after {anchor} deleted, and the {len(delta)} blocks after it sent"
    )
    log.debug("responses: %s", plan.why)
    return plan


def plan_conversation(
    turn: Turn, state: ConversationState | None, *, include_system: bool, metrics: ResponsesMetrics | None
) -> Plan:
    """Conversation + delta when the conversation provably holds the Turn up to its last response; the
    whole Turn into the conversation for a fresh Turn; else the Turn in a (new or empty) conversation."""
    cid = state.conversation_id if state else None
    if state is None or not cid:
        return plan_new_conversation(turn, include_system=include_system)
    last, base = state.previous_response_id, state.base
    scan = _timed_scan(turn, include_system, chain_seed(state, "conversation"), metrics)
    if last and scan.valid(last):
        delta, items = _delta(turn, last, include_system)
        if items:
            log.debug("responses: conversation %s after %s, %d items", cid, last, len(items))
            return Plan("conversation", items, delta, conversation_id=cid, base=base, prefix=scan.hasher)
        code, detail = "empty_delta", f"nothing after {last} to send in conversation {cid}"
    elif (repair := _plan_repair(turn, scan, cid, last, base, include_system)) is not None:
        return repair
    elif not scan.spans and base == cid:
        items = blocks_to_items(turn.blocks, include_system=include_system)
        log.debug("responses: fresh Turn into conversation %s, %d items", cid, len(items))
        return Plan("conversation", items, list(turn.blocks), True, conversation_id=cid, base=base, prefix=scan.hasher)
    elif not scan.spans:
        code, detail = "conversation_not_empty", f"no block of the Turn was answered in conversation {cid}"
    else:
        code = _mismatch_code(scan, last)
        detail = f"conversation {cid} no longer matches the Turn ({scan.reason()})"
    if base:
        detail += f"; the context held before this Turn in {base} is not carried over"
    return plan_new_conversation(turn, include_system=include_system, fallback=code, detail=detail, reuse=cid)


def plan_request(
    turn: Turn,
    mode: str,
    state: ConversationState | None,
    *,
    include_system: bool,
    store: bool = True,
    ignores_state: bool = False,
    metrics: ResponsesMetrics | None = None,
) -> Plan:
    """The plan of the request the engine sends for ``turn`` in ``mode`` (the one place that decides it:
    the engine sends it, ``geppetto inspect`` and the web inspector show it). ``ignores_state``: the
    server ignores server-side state, so the whole Turn goes. ``metrics`` gets the anchor selection time."""
    if ignores_state:
        return plan_full(turn, include_system=include_system)
    if mode == "chained":
        return plan_chained(turn, state, include_system=include_system, metrics=metrics)
    if mode == "conversation":
        return plan_conversation(turn, state, include_system=include_system, metrics=metrics)
    if store and state is not None and state.previous_response_id:
        # a Turn that goes on after a stored response: keep its proof, hash only the new blocks (a fresh
        # Turn's few blocks cost less hashed once than sealed; store=False writes no fingerprint at all)
        return plan_stateless(turn, state, include_system=include_system)
    return plan_full(turn, include_system=include_system)
