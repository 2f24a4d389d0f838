"""Recording a response: its blocks appended, tagged for anchoring, its reasoning stamped, the state kept."""

from __future__ import annotations

import logging
from typing import Any

from geppetto.events import EventFinal, metadata_for, publish
from geppetto.output import settle_output
from geppetto.pricing import record_usage
from geppetto.providers._chain import chain_extra
from geppetto.providers._stream_loop import publish_parts
from geppetto.turns import (
    BLOCK_META_PROVIDER,
    TURN_META_MODEL,
    TURN_META_PROVIDER,
    TURN_META_STOP_REASON,
    BlockKind,
    Turn,
)

from ._background import not_an_anchor
from ._request import Plan, stamp_response, tag_blocks
from ._send import turn_ids
from ._state import ConversationState, set_state
from ._stream import StreamState, stop_reason_of, unreplayed_items, usage_of

__all__ = ["record"]

log = logging.getLogger("geppetto.providers.openai_responses")


def record(
    self: Any,
    turn: Turn,
    start: int,
    plan: Plan,
    stream: StreamState,
    mode: str,
    prior: ConversationState | None,
) -> None:
    """Append the response's blocks to ``turn``, tag them for anchoring, stamp its reasoning for the prefix
    guard, record the state and publish the final events."""
    response = stream.response
    blocks = stream.blocks()
    others = len(turn.blocks) - start  # blocks another run appended to this Turn while this one ran
    start = len(turn.blocks)
    for block in blocks:
        BLOCK_META_PROVIDER.set(block.metadata, self.provider)
        turn.append(block)
    settle_output(turn, blocks, self._output_of(turn))
    # the reasoning's prefix for the guard: the plan's digest covers the Turn unless another run added blocks
    stamp_response(turn, start, None if others else plan.prefix, include_system=not self.instructions_mode)
    response_id = str(response.get("id") or "")
    _anchor(self, turn, start, stream, plan, response_id=response_id, others=others, mode=mode, prior=prior)
    _finish(self, turn, response, blocks, plan)


def _anchor(
    self: Any,
    turn: Turn,
    start: int,
    stream: StreamState,
    plan: Plan,
    *,
    response_id: str,
    others: int,
    mode: str,
    prior: ConversationState | None,
) -> None:
    """Tag the response's blocks (from ``start``) for anchoring a later request and keep the Turn's state,
    unless the response cannot anchor: no id, blocks added meanwhile by another run, or not finished."""
    refused = unreplayed_items(stream.output_items())
    unfinished = not_an_anchor(stream.response, plan.previous_response_id, plan.conversation_id, echo=not plan.evidence)
    if not response_id:
        log.warning(
            "responses: the response carried no id; its blocks cannot anchor a later request (%s)", turn_ids(turn)
        )
    elif others:
        # One inference per Turn at a time (seed 000, edge case 5): this answer was asked for on a Turn
        # that no longer ends where the request ended, so the server's context behind it is not the
        # Turn's. Its blocks keep their response id but never anchor; the state is left as it was.
        log.warning(
            "responses: %d block(s) were added to the Turn while response %s was running (two inferences "
            "at once on one Turn?); its %d block(s) will not anchor a later request, which sends them "
            "as new input instead (%s). Run one inference per Turn at a time: await each run, or give "
            "each concurrent run its own turn.clone()",
            others,
            response_id,
            len(turn.blocks) - start,
            turn_ids(turn),
        )
        tag_blocks(turn, start, response_id, refused="concurrent inference on the same Turn", stored=self.store)
    elif unfinished:
        log.warning("responses: response %s cannot anchor a later request: %s", response_id, unfinished)
    else:
        if refused and self.store:
            log.warning("responses: response %s cannot anchor a later request: %s", response_id, refused)
        tag_blocks(
            turn,
            start,
            response_id,
            include_system=not self.instructions_mode,
            seed=plan.seed(),
            prefix=plan.prefix,
            refused=refused,
            stored=self.store,
        )
        if self.store:
            # the mode asked for is kept (the kill switch may have sent this request stateless); so is
            # the conversation a stateless request left alone
            if plan.mode == "conversation":
                cid = plan.conversation_id
            else:
                cid = prior.conversation_id if prior is not None and mode == "conversation" else None
            set_state(turn, ConversationState(mode, cid, response_id, plan.base))


def _finish(self: Any, turn: Turn, response: dict[str, Any], blocks: list[Any], plan: Plan) -> None:
    usage = usage_of(response)
    stop = stop_reason_of(response, blocks)
    TURN_META_PROVIDER.set(turn.metadata, self.provider)
    model = str(response.get("model") or self.model)
    TURN_META_MODEL.set(turn.metadata, model)
    TURN_META_STOP_REASON.set(turn.metadata, stop)
    meta = metadata_for(turn, self.provider, self.model)
    record_usage(turn, blocks, meta, provider=self.provider, model=model, usage=usage)
    publish_parts(meta, blocks)
    meta.stop_reason = stop
    meta.extra["response_id"] = str(response.get("id") or "")
    meta.extra.update(
        chain_extra(
            mode=plan.mode,
            anchor=plan.previous_response_id or plan.conversation_id or "",
            items=len(plan.items),
            full=plan.full,
            fallback=plan.fallback,
            detail=plan.detail,
            sent=plan.blocks,
            why=plan.why,
        )
    )
    if plan.evidence:  # an answer without an exact echo: what showed the server kept (or ignored) the state
        meta.extra["responses.evidence"] = plan.evidence
    if plan.repair:  # a conversation repaired in place: the anchor it was cut back to, the items deleted
        meta.extra["responses.repair"] = {"after": plan.repair, "deleted": plan.deleted}
    if plan.created:  # how a new conversation is reported: here, in the log (INFO) and in the Turn's state
        meta.extra["responses.conversation_created"] = plan.conversation_id
        if plan.replaced:
            meta.extra["responses.conversation_replaced"] = plan.replaced
    text = "".join(b.text for b in blocks if b.kind is BlockKind.LLM_TEXT)
    publish(EventFinal(meta, text))
