"""A Turn as a plain list of chat messages, and back.

The message form is the lowest common denominator of chat APIs::

    {"role": "system" | "user" | "assistant" | "tool", "content": str,
     "images": [{"url": str} | {"data": str, "media_type": str}],   # user only, optional
     "tool_calls": [{"id": str, "name": str, "args": dict | str}],   # assistant only, optional
     "tool_call_id": str, "error": str}                              # tool only

Images are the user block's ``payload["images"]`` (:data:`PAYLOAD_IMAGES`), copied as they are in
both directions: each a mapping with ``url`` (an http(s) or ``data:`` URL), or ``data`` (base64) and
``media_type``, the forms every engine reads.

Reasoning blocks have no place in it and are left out. Consecutive ``tool_call`` blocks (with any
``llm_text`` right before them) become one assistant message.
"""

from __future__ import annotations

from typing import Any

from .._exceptions import TurnFormatError
from .._json import dumps
from ._keys import copy_json
from ._model import (
    PAYLOAD_ARGS,
    PAYLOAD_ERROR,
    PAYLOAD_ID,
    PAYLOAD_IMAGES,
    PAYLOAD_NAME,
    PAYLOAD_RESULT,
    Block,
    BlockKind,
    Turn,
)

__all__ = ["blocks_from_messages", "messages_from_turn", "result_text", "turn_from_messages"]

Message = dict[str, Any]


def result_text(result: Any) -> str:
    """A tool result as the text a model reads: strings as they are, anything else as JSON."""
    return result if isinstance(result, str) else dumps(result, ensure_ascii=False)


def messages_from_turn(turn: Turn) -> list[Message]:
    """The turn as chat messages."""
    out: list[Message] = []
    for block in turn.blocks:
        kind = block.kind
        if kind is BlockKind.SYSTEM:
            out.append({"role": "system", "content": block.text})
        elif kind is BlockKind.USER:
            msg: Message = {"role": "user", "content": block.text}
            if block.payload.get(PAYLOAD_IMAGES):
                msg["images"] = copy_json(block.payload[PAYLOAD_IMAGES])
            out.append(msg)
        elif kind is BlockKind.LLM_TEXT:
            out.append({"role": "assistant", "content": block.text})
        elif kind is BlockKind.TOOL_CALL:
            call = {
                "id": block.payload.get(PAYLOAD_ID, ""),
                "name": block.payload.get(PAYLOAD_NAME, ""),
                "args": block.payload.get(PAYLOAD_ARGS, {}),
            }
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant" and "tool_call_id" not in last:
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind is BlockKind.TOOL_USE:
            msg = {
                "role": "tool",
                "tool_call_id": block.payload.get(PAYLOAD_ID, ""),
                "content": result_text(block.payload.get(PAYLOAD_RESULT, "")),
            }
            if block.payload.get(PAYLOAD_ERROR) is not None:
                msg["error"] = block.payload[PAYLOAD_ERROR]
            out.append(msg)
    return out


def blocks_from_messages(messages: list[Message], start: int = 0) -> list[Block]:
    """Blocks for ``messages[start:]``."""
    blocks: list[Block] = []
    for i in range(start, len(messages)):
        msg = messages[i]
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise TurnFormatError(f"expected a message mapping, found a {type(msg).__name__}", field=where)
        role = msg.get("role")
        content = msg.get("content") or ""
        if not isinstance(content, str):
            raise TurnFormatError("content must be text", field=f"{where}.content")
        if role == "system":
            blocks.append(Block.system(content))
        elif role == "user":
            blocks.append(Block.user(content, images=_images(msg.get("images"), f"{where}.images")))
        elif role == "assistant":
            if content:
                blocks.append(Block.llm_text(content))
            calls = msg.get("tool_calls") or []
            if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
                raise TurnFormatError("tool_calls must be a list of mappings", field=f"{where}.tool_calls")
            for call in calls:
                blocks.append(Block.tool_call(call.get("id", ""), call.get("name", ""), call.get("args", {})))
        elif role == "tool":
            blocks.append(Block.tool_use(msg.get("tool_call_id", ""), content, msg.get("error")))
        else:
            raise TurnFormatError(f"unknown role {role!r}; use system, user, assistant or tool", field=f"{where}.role")
    return blocks


def _images(images: Any, where: str) -> list[dict[str, Any]] | None:
    if images is None:
        return None
    if not isinstance(images, list) or not all(isinstance(i, dict) for i in images):
        raise TurnFormatError(
            "images must be a list of mappings, each {url: ...} or {data: <base64>, media_type: ...}", field=where
        )
    return copy_json(images)  # type: ignore[no-any-return]


def turn_from_messages(messages: list[Message]) -> Turn:
    """A new turn holding ``messages`` as blocks."""
    turn = Turn()
    turn.extend(blocks_from_messages(messages))
    return turn
