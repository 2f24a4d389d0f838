"""Validation with the server (opt-in): read the context the server holds and compare it with the Turn.

Chained: the anchor's chain is walked back (``GET /responses/{id}`` for each response's output and
``previous_response_id``, ``GET /responses/{id}/input_items?order=asc`` for its own input; provider-apis
§2.7 leaves open whether a chained response lists only its own input, and the simulator does), up to
a response an earlier validation already matched (periodic checks: each link is read once), the
Turn's ``base``, or the chain's start. Conversation: ``GET /conversations/{id}/items?order=asc``. Both sides are compared
in what the model reads (role and text of messages, call ids, names and parsed arguments, outputs,
reasoning and other items by id), up to the end of the anchor's blocks. When the Turn holds a server
compaction item, both sides are compared from the latest one (what the server reads), and the walk back
stops at the link that holds it.

A mismatch is logged, counted (``validation:mismatch``) and the blocks of every response in the Turn
are marked ``openai.not_anchorable@v1``, so the next request sends the whole Turn and a new chain (or
conversation) starts.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

from geppetto.turns import BLOCK_META_RESPONSE_ID, PAYLOAD_ITEM, Turn

from .._stateful import ResponsesMetrics, Validation
from ._items import blocks_to_items, replayed, server_compaction
from ._request import ANCHOR_REFUSED, chain_seed, scan_anchors
from ._send import Api
from ._state import ConversationState, list_items, visible

__all__ = ["Validation", "validate_server_context", "visible"]

log = logging.getLogger("geppetto.providers.openai_responses")

_RID = str(BLOCK_META_RESPONSE_ID)
MISMATCH = "the server's stored context differs from the Turn (validation)"


def _link_key(response_id: str, cut: str | None) -> str:
    """A validated link's key: its count of items runs from the chain's start, or from compaction ``cut``."""
    return f"{response_id}@{cut}" if cut else response_id


def _compaction_id(held: list[Any]) -> str | None:
    """The id of the server compaction item ``held`` starts with (``replayed`` puts it first), else None."""
    if held and server_compaction(held[0]):
        item = held[0].payload.get(PAYLOAD_ITEM)
        return str(item.get("id")) if isinstance(item, dict) else None
    return None


def _from_compaction(items: list[tuple[Any, ...]], cut: str | None) -> list[tuple[Any, ...]]:
    """The server's items from the compaction item ``cut`` on (all of them when it holds none such)."""
    if cut is None or ("compaction", cut) not in items:
        return items
    return items[len(items) - 1 - items[::-1].index(("compaction", cut)) :]


class ValidatedLinks:
    """Responses an earlier validation matched, with the number of context items up to their end
    (bounded: the oldest are forgotten)."""

    def __init__(self, size: int = 4096) -> None:
        self._links: OrderedDict[str, int] = OrderedDict()
        self._size = size

    def get(self, response_id: str) -> int | None:
        return self._links.get(response_id)

    def add(self, response_id: str, count: int) -> None:
        self._links[response_id] = count
        self._links.move_to_end(response_id)
        while len(self._links) > self._size:
            self._links.popitem(last=False)


async def validate_server_context(
    api: Api,
    turn: Turn,
    state: ConversationState | None,
    mode: str,
    *,
    include_system: bool,
    metrics: ResponsesMetrics,
    links: ValidatedLinks,
    reread: bool = True,
) -> Validation:
    """Compare the server's context at the Turn's anchor with the Turn (see the module text)."""
    if mode == "stateless":
        return Validation(None, None, "stateless: the server holds no context")
    scan = scan_anchors(turn, include_system=include_system, seed=chain_seed(state, mode), incremental=True)
    anchor = scan.best() if mode == "chained" else (state.previous_response_id if state else None)
    if not anchor or not scan.valid(anchor):
        return Validation(None, None, "no anchor: the next request sends the whole Turn")
    end = scan.spans[anchor].last
    held = replayed(turn.blocks[: end + 1])
    cut = _compaction_id(held)
    mine = [visible(i) for i in blocks_to_items(held, include_system=include_system)]
    base = state.base if state else None
    reads = 0
    if mode == "conversation":
        cid = state.conversation_id if state else None
        stored, reads = await list_items(api, f"/conversations/{cid}/items")
        theirs = _from_compaction([visible(i) for i in stored], cut)
        if base:  # the conversation holds context from before the Turn: compare the Turn's part
            theirs = theirs[len(theirs) - len(mine) :] if len(theirs) >= len(mine) else theirs
    else:
        theirs, known, reads = await _walk_chain(api, anchor, base, cut, links, reread)
        mine = mine[known:]
    result = Validation(anchor, theirs == mine, requests=reads, server=theirs, turn=mine)
    if result.matches:
        if mode == "chained":
            links.add(_link_key(anchor, cut), known + len(mine))
        metrics.validation("match")
        return result
    _report_mismatch(turn, result, anchor, metrics)
    return result


async def _walk_chain(
    api: Api, anchor: str, base: str | None, cut: str | None, links: ValidatedLinks, reread: bool
) -> tuple[list[tuple[Any, ...]], int, int]:
    """The items the server holds from ``anchor`` back to ``base`` (or to the compaction item ``cut``), the
    number of Turn items a validated link already covers (the walk stops there), and the reads it took."""
    links_walked: list[list[dict[str, Any]]] = []
    known = reads = 0
    rid: str | None = anchor
    while rid and rid != base:
        count = None if reread else links.get(_link_key(rid, cut))
        if count is not None:
            known = count
            break
        response = await api.get(f"/responses/{rid}")
        own, n = await list_items(api, f"/responses/{rid}/input_items")
        reads += 1 + n
        link = own + [o for o in response.get("output") or [] if isinstance(o, dict)]
        links_walked.append(link)
        if cut and any(i.get("type") == "compaction" and i.get("id") == cut for i in link):
            break  # what the server holds starts at this compaction item: the links before it do not count
        prev = response.get("previous_response_id")
        rid = str(prev) if prev else None
    return _from_compaction([visible(i) for link in reversed(links_walked) for i in link], cut), known, reads


def _report_mismatch(turn: Turn, result: Validation, anchor: str, metrics: ResponsesMetrics) -> None:
    """Say where the server's context and the Turn part, and trust no response of this chain again."""
    theirs, mine = result.server, result.turn
    diverge = next(
        (i for i, (a, b) in enumerate(zip(theirs, mine, strict=False)) if a != b), min(len(theirs), len(mine))
    )
    result.detail = (
        f"{MISMATCH}: at item {diverge} the server holds "
        f"{theirs[diverge] if diverge < len(theirs) else 'nothing'} and the Turn "
        f"{mine[diverge] if diverge < len(mine) else 'nothing'}; the next request sends the whole Turn"
    )
    log.warning("responses: %s (response %s)", result.detail, anchor)
    metrics.validation("mismatch")
    for block in turn.blocks:  # no response of this chain is trusted again: the next request starts a new one
        if block.metadata.get(_RID):
            ANCHOR_REFUSED.set(block.metadata, MISMATCH)
