"""OpenAI Responses: in-request compaction (``context_management``).

In-request compaction: a create request with ``context_management: [{"type": "compaction",
"compact_threshold": N}]`` whose rendered context (instructions and items, after pruning) passes ``N``
tokens is compacted before the model answers: the whole context is folded into one ``compaction`` item
(sealed like the ``/responses/compact`` one), which comes first in the response's output; the model then
answers from that item alone. The server's copy of the chain is compacted with it: from then on every
context that holds an item compacted this way starts at the latest such item (what came before it is
dropped, as the OpenAI Compaction guide tells clients they may do themselves). A compaction item made by
``/responses/compact`` only summarizes the items it was given; it drops nothing.
"""

from __future__ import annotations

import copy
from typing import Any

from ._errors import SimError
from ._openai_items import to_msgs
from ._openai_out import input_tokens
from ._state import SimState, new_id
from ._tokens import count_text

__all__ = ["compact_in_request", "compaction_threshold", "prune"]


def compaction_threshold(body: dict[str, Any]) -> int | None:
    """The request's ``compact_threshold`` (None when it asks for no compaction); an unknown entry type is a 400."""
    entries = body.get("context_management")
    if not isinstance(entries, list):
        return None
    threshold: int | None = None
    for i, entry in enumerate(entries):
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind != "compaction":
            raise SimError(
                400,
                f"Invalid value: '{kind}'. Supported values are: 'compaction'.",
                param=f"context_management[{i}].type",
                code="invalid_value",
            )
        value = entry.get("compact_threshold")
        if isinstance(value, int) and not isinstance(value, bool):
            threshold = value
    return threshold


def _summary(state: SimState, item: dict[str, Any]) -> dict[str, Any]:
    """A compaction item as the model reads it (its sealed summary under ``summary``)."""
    if item.get("summary") is None:
        payload = state.unseal("openai", str(item.get("encrypted_content") or ""))
        item = {**item, "summary": payload.get("t", "") if payload else ""}
    return item


def prune(state: SimState, context: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The context from the latest item an in-request compaction made (the whole context when none)."""
    with state.lock:
        made = state.compactions
        for i in range(len(context) - 1, -1, -1):
            item = context[i]
            if item.get("type") == "compaction" and item.get("id") in made:
                return [_summary(state, item), *context[i + 1 :]]
    return context


def compact_in_request(
    state: SimState, context: list[dict[str, Any]], threshold: int | None, instructions: str | None
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """``(context the model answers from, compaction output item or None)``: the context folded into one
    compaction item when it passes ``threshold`` tokens."""
    if threshold is None or input_tokens(context, instructions) <= threshold:
        return context, None
    msgs = to_msgs(context)
    words = " ".join(f"{m.role}: {m.text}" for m in msgs if m.text).split()
    budget = max(16, threshold // 10)  # the summary stays well under the threshold, so the chain can grow again
    text = f"Summary of {len(context)} earlier items. " + " ".join(words[-budget:])
    while count_text(text) > budget * 2:
        text = text[: len(text) * 3 // 4]
    item_id = new_id("cmp_")
    item = {"id": item_id, "type": "compaction", "encrypted_content": state.seal("openai", item_id, text)}
    with state.lock:
        state.compactions.add(item_id)
        state.items[item_id] = item
    return [{**copy.deepcopy(item), "summary": text}], item
