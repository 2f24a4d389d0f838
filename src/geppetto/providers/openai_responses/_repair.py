"""Repairing a conversation in place: delete its items after the anchor, so the delta can follow it.

A plan with ``repair`` set names a response answered in the conversation whose prefix still matches the
Turn (the anchor proof). Before the request, the conversation's items are listed (``order=asc``) and the
run of them that equals the Turn's wire form up to the end of that response is found; every item after
that run is deleted (``DELETE /conversations/{id}/items/{item_id}``, newest first), and the request
then sends only the blocks after the anchor. When the items do not hold that run (the conversation was
changed elsewhere) or a deletion fails, the plan becomes a new conversation seeded with the whole Turn,
with the reason (fallback ``repair_failed``); the old conversation is reported as replaced.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from geppetto._exceptions import ProviderError
from geppetto.turns import BLOCK_META_RESPONSE_ID, Turn

from ._items import blocks_to_items, replayed
from ._request import Plan, plan_new_conversation
from ._state import Reader, list_items, visible

__all__ = ["repair_conversation"]

log = logging.getLogger("geppetto.providers.openai_responses")

_RID = str(BLOCK_META_RESPONSE_ID)


class Api(Reader, Protocol):
    """What a repair needs of an engine's ``Api``: reading a list and deleting."""

    async def delete(self, path: str) -> Any: ...


def _end_of(turn: Turn, response_id: str) -> int:
    """The index of ``response_id``'s last block in the Turn."""
    return max(i for i, b in enumerate(turn.blocks) if b.metadata.get(_RID) == response_id)


async def _stale_items(http: Api, turn: Turn, plan: Plan, include_system: bool) -> list[str]:
    """The ids of the conversation's items after the anchor's (raises ``ValueError`` saying why none can be
    told apart)."""
    cid, anchor = plan.conversation_id, str(plan.repair)
    held = replayed(turn.blocks[: _end_of(turn, anchor) + 1])
    mine = [visible(i) for i in blocks_to_items(held, include_system=include_system)]
    stored, _ = await list_items(http, f"conversations/{cid}/items")
    theirs = [visible(i) for i in stored]
    # The Turn's part starts at the conversation's start, or later when the conversation held context
    # before the Turn (``base``) or a server compaction cut what came before.
    for start in range(len(theirs) - len(mine) + 1):
        if theirs[start : start + len(mine)] == mine:
            return [str(i.get("id")) for i in stored[start + len(mine) :]]
    raise ValueError(f"its items do not hold the Turn up to response {anchor}")


async def repair_conversation(http: Api, turn: Turn, plan: Plan, *, include_system: bool) -> None:
    """Delete the items of ``plan``'s conversation after its ``repair`` anchor (see the module text); on
    failure turn ``plan`` into a new conversation seeded with the whole Turn."""
    if plan.repair is None or plan.conversation_id is None:
        return
    cid = plan.conversation_id
    try:
        stale = await _stale_items(http, turn, plan, include_system)
        for item_id in reversed(stale):
            await http.delete(f"conversations/{cid}/items/{item_id}")
            plan.deleted += 1
    except (ProviderError, ValueError) as exc:
        reason = exc.message if isinstance(exc, ProviderError) else str(exc)
        detail = f"conversation {cid} could not be repaired in place ({reason}); a new conversation holds the Turn"
        fresh = plan_new_conversation(turn, include_system=include_system, fallback="repair_failed", detail=detail)
        plan.items, plan.blocks, plan.full, plan.seed_items = fresh.items, fresh.blocks, True, fresh.seed_items
        plan.conversation_id, plan.fallback, plan.detail, plan.prefix = None, fresh.fallback, detail, None
        plan.repair, plan.replaced, plan.why = None, cid, detail
        return
    log.info(
        "responses: conversation %s repaired in place: %d items after response %s deleted, %d blocks to send",
        cid,
        plan.deleted,
        plan.repair,
        len(plan.blocks),
    )
