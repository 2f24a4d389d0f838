"""OpenAI's silent reasoning drop: a reasoning item replayed after a changed prefix is not used.

Each reasoning item the simulator produces is bound to the digest of what the model read before it:
``instructions`` and the effective context, each item reduced to what the model reads (role and text of a
message, a call's id, name and arguments, an output's text, a reasoning item's id; ids of messages,
statuses and content shapes aside, so a replay in another form is the same prefix). A later request whose
context holds the item behind another prefix still succeeds, as the service's does, but the model does
not see the item: it reasons again, so the answer's reasoning tokens grow by what the item held, and the
request's entry in the simulator's log says which items were dropped (``effects["dropped_reasoning"]``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ._openai_items import _text_of, arguments_json
from ._state import SimState
from ._tokens import count_text

__all__ = ["REASONING_OVERHEAD_DROPPED", "bind_reasoning", "drop_stale_reasoning", "redo_cost"]

REASONING_OVERHEAD_DROPPED = 16
"""Reasoning tokens the model spends again for each reasoning item it could not use (besides its text)."""


def _read(item: dict[str, Any]) -> Any:
    """An item as the model reads it (see the module docstring)."""
    kind = item.get("type") or "message"
    if kind == "message":
        return ["message", item.get("role"), _text_of(item.get("content"))]
    if kind == "function_call":
        return ["function_call", item.get("call_id"), item.get("name"), _args(item.get("arguments"))]
    if kind == "function_call_output":
        return ["function_call_output", item.get("call_id"), _text_of(item.get("output"))]
    return [kind, item.get("id")]


def _args(args: Any) -> Any:
    """Arguments as a value when they are JSON (any spacing reads the same), else as they came."""
    try:
        return json.loads(arguments_json(args or "{}"))
    except (ValueError, TypeError, RecursionError):
        return str(args)


def _start(instructions: str | None) -> Any:
    h = hashlib.sha256()
    h.update(json.dumps(instructions or "").encode() + b"\n")
    return h


def _absorb(h: Any, item: dict[str, Any]) -> None:
    try:
        text = json.dumps(_read(item), sort_keys=True, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):  # a value nested too deep to write: its repr stands in
        text = repr(item)
    h.update(text.encode() + b"\n")


def drop_stale_reasoning(
    state: SimState, context: list[dict[str, Any]], instructions: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(context the model reads, reasoning items dropped)``: a reasoning item whose prefix differs from
    the one it was produced after is left out (the ones after it are judged without it)."""
    h = _start(instructions)
    kept: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    for item in context:
        if item.get("type") == "reasoning":
            with state.lock:
                bound = state.reasoning_bound.get(str(item.get("id")))
            if bound is not None and bound != h.hexdigest():
                dropped.append(item)
                continue
        kept.append(item)
        _absorb(h, item)
    return kept, dropped


def bind_reasoning(
    state: SimState, context: list[dict[str, Any]], output: list[dict[str, Any]], instructions: str | None
) -> None:
    """Record the prefix of each reasoning item of ``output``: the context the model read, then the output
    items before it."""
    h = _start(instructions)
    for item in context:
        _absorb(h, item)
    with state.lock:
        for item in output:
            if item.get("type") == "reasoning":
                state.reasoning_bound[str(item.get("id"))] = h.hexdigest()
            _absorb(h, item)


def redo_cost(dropped: list[dict[str, Any]]) -> int:
    """The reasoning tokens the model spends again for the items it could not use."""
    return sum(
        REASONING_OVERHEAD_DROPPED + sum(count_text(str(s.get("text", ""))) for s in i.get("summary") or [])
        for i in dropped
    )
