"""Judging a stateful answer that did not echo its state, before it is recorded into the Turn.

The engine side of :mod:`._evidence`: what the request sent (bounds of its tokens, the anchor's recorded
usage from the Turn), the verdict of the answer alone, and, once per endpoint when that is open, the one
settling request. Only answers without an exact echo come here: the common path costs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from geppetto.pricing import BLOCK_META_USAGE
from geppetto.turns import BLOCK_META_RESPONSE_ID, Turn

from ._body import COUNT_FIELDS
from ._evidence import Endpoint, Requests, Sent, StateIgnored, Verdict, judge, settle, token_bound
from ._plan import Plan
from ._state import get_state

__all__ = ["judge_answer", "sent_of"]


def _anchor_usage(turn: Turn, anchor: str | None) -> tuple[int | None, int | None]:
    """(input tokens, visible output tokens) recorded on the anchor's last block, when the Turn has it."""
    if not anchor:
        return None, None
    key = str(BLOCK_META_RESPONSE_ID)
    for block in reversed(turn.blocks):
        if block.metadata.get(key) == anchor:
            stamp = BLOCK_META_USAGE.get(block.metadata)
            usage = stamp.get("usage") if isinstance(stamp, dict) else None
            if not isinstance(usage, dict) or not usage.get("input_tokens"):
                return None, None
            out = int(usage.get("output_tokens") or 0) - int(usage.get("reasoning_tokens") or 0)
            return int(usage["input_tokens"]), max(0, out)
    return None, None


def sent_of(turn: Turn, plan: Plan, body: Mapping[str, Any]) -> Sent:
    """What ``plan``'s request (``body``) sent, with the anchor's recorded usage."""
    delta = token_bound(plan.items)
    fixed = [body[k] for k in ("instructions", "text") if body.get(k)] + list(body.get("tools") or [])
    if plan.previous_response_id:
        anchor: str | None = plan.previous_response_id
    else:
        state = get_state(turn)
        anchor = state.previous_response_id if state is not None else None
    anchor_input, anchor_output = _anchor_usage(turn, anchor)
    return Sent(
        previous_response_id=plan.previous_response_id,
        conversation_id=plan.conversation_id,
        bound=delta + token_bound(fixed),
        delta_bound=delta,
        anchor=anchor,
        anchor_input=anchor_input,
        anchor_output=anchor_output,
        items=len(plan.items),
        shrinks=bool(body.get("context_management")) or body.get("truncation") == "auto",
    )


async def judge_answer(
    endpoint: Endpoint, api: Requests, turn: Turn, plan: Plan, body: Mapping[str, Any], response: Mapping[str, Any]
) -> Verdict:
    """The verdict this answer is taken on: its own evidence; else, the first time at this endpoint, the one
    settling request; else what is known of the endpoint. Raises :class:`StateIgnored` when the server did
    not use the stored context (the caller sends the whole Turn). What is learned is remembered."""
    sent = sent_of(turn, plan, body)
    verdict = judge(sent, response)
    known = endpoint.current()
    if verdict.previous_response_id != "unknown":
        await endpoint.learn(verdict)
    elif known is None:
        count_body = {k: v for k, v in body.items() if k in COUNT_FIELDS}
        count_body.pop("previous_response_id", None)
        count_body.pop("conversation", None)
        verdict = await settle(api, sent, response, count_body)
        await endpoint.learn(verdict)  # an open verdict too: the endpoint is not asked again
    else:
        verdict = replace(known, detail=f"as learned before; this answer: {verdict.detail}")
    if verdict.ignored:
        raise StateIgnored(sent.field, verdict)
    return verdict
