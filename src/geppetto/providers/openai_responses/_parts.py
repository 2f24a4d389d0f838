"""What a Responses output item carries besides its text, kept on its block and replayed as it came:
a message's ``phase`` (``commentary`` / ``final_answer``, gpt-5.x) and its content parts with their
annotations (citations), a reasoning item's ``reasoning_text`` content parts.

A message with kept parts is replayed in its output form, with its id, where that is safe: right after
the reasoning it pairs with, or when no reasoning came before it in its response (``standalone``: the
server needs no reasoning item with it) and the server stored that response. Elsewhere it goes as an
easy input message, whose form has no place for annotations: text and ``phase`` only.

Kept parts are replayed only while the block's text is still theirs: a block whose text was changed
replays its text alone (the parts would contradict it).
"""

from __future__ import annotations

from typing import Any

from geppetto.turns import PAYLOAD_PHASE, PAYLOAD_TEXT, Block, BlockKind

__all__ = [
    "PAYLOAD_CONTENT",
    "PAYLOAD_PHASE",
    "PAYLOAD_STANDALONE",
    "mark_standalone",
    "message_extras",
    "reasoning_extras",
    "replayed_message_parts",
    "replayed_reasoning_parts",
]

"""Payload key of an ``llm_text`` block: the message's ``phase`` as the API gave it."""

PAYLOAD_CONTENT = "content"
"""Payload key of an ``llm_text`` block (its content parts, when they carry annotations or are more than one
text) or of a ``reasoning`` block (its ``reasoning_text`` parts), as the API gave them without logprobs."""


PAYLOAD_STANDALONE = "standalone"
"""Payload key of an ``llm_text`` block with kept parts: True when no reasoning came before it in its response."""


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [p for p in value if isinstance(p, dict)] if isinstance(value, list) else []


def message_extras(item: dict[str, Any]) -> dict[str, Any]:
    """The payload entries a message item adds to its block's text and item id."""
    extras: dict[str, Any] = {}
    if isinstance(item.get("phase"), str):
        extras[PAYLOAD_PHASE] = item["phase"]
    parts = _dicts(item.get("content"))
    plain = len(parts) == 1 and parts[0].get("type") == "output_text" and not parts[0].get("annotations")
    if parts and not plain:
        extras[PAYLOAD_CONTENT] = [{k: v for k, v in p.items() if k != "logprobs"} for p in parts]
    return extras


def reasoning_extras(item: dict[str, Any]) -> dict[str, Any]:
    """The payload entries a reasoning item adds: its ``reasoning_text`` parts."""
    parts = [p for p in _dicts(item.get("content")) if p.get("type") == "reasoning_text"]
    return (
        {PAYLOAD_CONTENT: [{"type": "reasoning_text", "text": str(p.get("text", ""))} for p in parts]} if parts else {}
    )


def _text(parts: list[dict[str, Any]]) -> str:
    return "".join(str(p.get("text") or p.get("refusal") or "") for p in parts)


def replayed_message_parts(block: Block) -> list[dict[str, Any]] | None:
    """The kept content parts of an ``llm_text`` block in their input form (None: send its text)."""
    parts = _dicts(block.payload.get(PAYLOAD_CONTENT))
    if not parts or _text(parts) != block.payload.get(PAYLOAD_TEXT, ""):
        return None
    out = []
    for part in parts:
        if part.get("type") == "output_text":
            part = {**part, "annotations": part.get("annotations") or [], "logprobs": []}
        out.append(part)
    return out


def replayed_reasoning_parts(block: Block) -> list[dict[str, Any]] | None:
    """The kept ``reasoning_text`` parts of a reasoning block (None when it has none or its text changed)."""
    parts = _dicts(block.payload.get(PAYLOAD_CONTENT))
    if not parts or _text(parts) != (block.payload.get(PAYLOAD_TEXT) or ""):
        return None
    return [dict(p) for p in parts]


def mark_standalone(items: list[dict[str, Any]], blocks: list[Block | None]) -> list[Block]:
    """``blocks`` (one per output item, None where an item makes none) without the Nones, each message with
    kept parts and no reasoning before it in the output marked ``standalone``."""
    out: list[Block] = []
    reasoned = False
    for item, block in zip(items, blocks, strict=True):
        reasoned = reasoned or item.get("type") == "reasoning"
        if block is None:
            continue
        if not reasoned and block.kind is BlockKind.LLM_TEXT and PAYLOAD_CONTENT in block.payload:
            block.payload[PAYLOAD_STANDALONE] = True
        out.append(block)
    return out
