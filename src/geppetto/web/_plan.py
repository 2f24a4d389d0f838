"""What the Responses engine would send for a Turn now and after one more prompt, worked out by the engine's own
planning code (what the Turn inspector and ``geppetto inspect`` show as the next request)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from .._exceptions import UsageError
from ..providers import likely_edit
from ..turns import TURN_META_PROVIDER, Block, Turn

__all__ = ["ChainedPlan", "chained_plan"]


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
    anchor_field: str = "previous_response_id"
    """The request field that names the anchor (``previous_interaction_id`` on the Interactions API)."""

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
            "anchor_field": self.anchor_field,
        }
        if self.next is not None:
            out["next"] = self.next.to_dict()
        return out


def _interactions_plan(turn: Turn) -> ChainedPlan | None:
    """The Interactions engine's plan for a Turn it answered last (None for any other Turn): the same proof,
    its own wire form."""
    from ..providers.gemini import InteractionsEngine, get_interactions_state, plan_interaction

    # the Interactions engine stamps its own provider name ("gemini-interactions"), not Gemini's
    if TURN_META_PROVIDER.get(turn.metadata) != InteractionsEngine.provider:
        return None
    state = get_interactions_state(turn)
    try:
        plan = plan_interaction(turn, "chained", state, store=True, metrics=None)
    except UsageError as exc:
        return ChainedPlan(None, [], str(exc), "chained", error=True, anchor_field="previous_interaction_id")
    reason = plan.detail or ("the first request of a chain" if plan.full else "")
    sent = [b.id for b in plan.blocks]
    return ChainedPlan(
        plan.previous_interaction_id,
        sent,
        reason,
        plan.mode,
        full=plan.full,
        fallback=plan.fallback,
        anchor_field="previous_interaction_id",
    )


def _engine_plan(turn: Turn) -> ChainedPlan:
    from ..providers.openai_responses import CHAINING_ENV, chaining_enabled, get_state, plan_request

    interactions = _interactions_plan(turn)
    if interactions is not None:
        return interactions
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
    if plan.fallback == "fingerprint_mismatch":
        reason += edited_by(turn)
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


def edited_by(turn: Turn) -> str:
    """Which block most likely broke the proof (:func:`~geppetto.providers._chain.likely_edit`), as the end of
    a fingerprint mismatch's reason; empty when no middleware marked a block."""
    found = likely_edit(turn)
    if found is None:
        return ""
    i, block, name = found
    return (
        f"; most likely block #{i} ({block.kind.value} {block.id[:8]}), which the middleware {name!r} "
        "made or edited: a middleware that changes what the server already holds makes the next request "
        "send the whole Turn (append a new block instead)"
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
