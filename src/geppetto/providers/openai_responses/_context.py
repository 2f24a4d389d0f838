"""The engine's calls about its context rather than for an answer: ``POST /responses/compact`` (by
reference when the server provably holds the blocks to compact) and ``POST /responses/input_tokens``.

Neither call makes a response to chain on: ``/responses/compact`` answers with a ``response.compaction``
object whose id is never put on a block (so no later request sends it as ``previous_response_id``), and
``/responses/input_tokens`` answers with a count only.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from geppetto._exceptions import NotFoundError, PreviousResponseNotFoundError, ProviderError
from geppetto.providers._landed import SAFE_TO_RESEND
from geppetto.turns import Block, BlockKind, Turn

from ._answer import item_to_block
from ._items import blocks_to_items, message_text, replayed
from ._request import COUNT_FIELDS, Plan, PromptCacheKey, chain_seed, plan_full, prompt_cache_key_for, scan_anchors
from ._send import Api
from ._state import get_state


class ContextEngine(Protocol):
    """What these calls need of their engine (a :class:`~geppetto.providers.openai_responses.ResponsesEngine`)."""

    provider: str
    model: str
    store: bool
    instructions_mode: bool
    prompt_cache_key: PromptCacheKey

    def _api(self) -> Api: ...

    def plan(self, turn: Turn) -> Plan: ...

    def build_body(self, turn: Turn, plan: Plan) -> dict[str, Any]: ...

    def guard_plan(self, turn: Turn, plan: Plan) -> None: ...


__all__ = ["ContextEngine", "compact_blocks", "count_turn_tokens", "reference_for"]

log = logging.getLogger("geppetto.providers.openai_responses")


def reference_for(turn: Turn, blocks: list[Block], *, include_system: bool) -> tuple[str, list[Block]] | None:
    """``(response id, blocks after it)`` when ``blocks`` are the Turn's first blocks (its system blocks
    aside) and a stored response provably holds them up to its end: ``/responses/compact`` can then name
    that response instead of sending them. None when it cannot (a Turn that continues a ``base``, a
    conversation, system blocks the server holds among them, or no valid anchor inside them)."""
    if not blocks:
        return None
    state = get_state(turn)
    if state is not None and (state.mode == "conversation" or chain_seed(state, "chained")):
        return None
    try:
        end = next(i for i in range(len(turn.blocks) - 1, -1, -1) if turn.blocks[i] is blocks[-1])
    except StopIteration:
        return None
    head = turn.blocks[: end + 1]
    rest = [b for b in head if b.kind is not BlockKind.SYSTEM]
    if len(rest) != len(blocks) or any(b is not c for b, c in zip(rest, blocks, strict=True)):
        return None
    if include_system and any(b.kind is BlockKind.SYSTEM for b in head):
        return None  # the server holds them; the compaction would fold in blocks the Turn keeps
    scan = scan_anchors(turn, include_system=include_system, seed="", incremental=True)
    held = [(span.last, rid) for rid, span in scan.spans.items() if span.last <= end and scan.valid(rid)]
    if not held:
        return None
    last, rid = max(held)
    return rid, list(turn.blocks[last + 1 : end + 1])


async def compact_blocks(engine: ContextEngine, blocks: list[Block], turn: Turn | None) -> list[Block]:
    """See :meth:`ResponsesEngine.compact`."""
    include_system = not engine.instructions_mode
    body: dict[str, Any] = {"model": engine.model}
    key = prompt_cache_key_for(engine.prompt_cache_key, turn) if turn is not None else None
    if key:
        body["prompt_cache_key"] = key  # the same cache as the session's requests
    ref = reference_for(turn, blocks, include_system=include_system) if turn is not None and engine.store else None
    api = engine._api()
    result: Any = None
    if ref is not None:
        rid, after = ref
        body["previous_response_id"] = rid
        items = blocks_to_items(after, include_system=include_system)
        if items:
            body["input"] = items
        try:
            result = await api.post("/responses/compact", body)
        except PreviousResponseNotFoundError:
            log.warning("responses: compaction by reference to %s failed (expired); sending the blocks", rid)
            body.pop("previous_response_id")
    if result is None:
        body["input"] = blocks_to_items(replayed(blocks), include_system=include_system)
        result = await api.post("/responses/compact", body)
    output = result.get("output") if isinstance(result, dict) else None
    if not isinstance(output, list):
        raise ProviderError(
            "POST /responses/compact answered without an output list; nothing was compacted",
            provider=engine.provider,
        )
    out: list[Block] = []
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message" and item.get("role") == "user":
            out.append(Block.user(message_text(item)))
        elif (block := item_to_block(item)) is not None:
            out.append(block)
    return out


def _count_plan(engine: ContextEngine, turn: Turn) -> Plan:
    plan = engine.plan(turn)  # the request the engine would send now, by its own planning code
    if plan.seed_items is not None:  # a request would first make a conversation: count the Turn as it stands
        plan = plan_full(turn, include_system=not engine.instructions_mode)
    return plan


async def count_turn_tokens(engine: ContextEngine, turn: Turn) -> int:
    """See :meth:`ResponsesEngine.count_tokens`."""
    plan = _count_plan(engine, turn)
    api = engine._api()

    async def count(plan: Plan) -> int:
        engine.guard_plan(turn, plan)  # count what would be sent: without reasoning whose prefix changed
        body = {k: v for k, v in engine.build_body(turn, plan).items() if k in COUNT_FIELDS}
        result = await api.post("/responses/input_tokens", body, SAFE_TO_RESEND)  # counts, changes nothing
        tokens = result.get("input_tokens") if isinstance(result, dict) else None
        if not isinstance(tokens, int) or isinstance(tokens, bool):
            raise ProviderError(
                f"POST /responses/input_tokens answered without an input_tokens count: {str(result)[:200]}",
                provider=engine.provider,
            )
        return tokens

    try:
        return await count(plan)
    except (PreviousResponseNotFoundError, NotFoundError):
        if plan.full and not (plan.previous_response_id or plan.conversation_id):
            raise
        log.info("responses: the server no longer holds the Turn's anchor; counting the whole Turn")
        return await count(plan_full(turn, include_system=not engine.instructions_mode))
