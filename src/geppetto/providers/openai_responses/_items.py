"""Blocks <-> Responses input items: the codec both ways, what an item carries besides its text (its parts)
and the hosted tool items typed for users.

Pairing rules: a reasoning item is replayed only directly before the item it produced (a function call, a
non-blank assistant message or a hosted-tool item of the same response: middleware that drops or moves blocks
can put another response's item right after it); that follower then keeps its provider ``id``, and every other
replayed function call or message is sent without one, so the API never sees a half pair (except a message
with kept parts, see the parts below, whose response's reasoning went: the API then takes its id). Reasoning travels
with its ``encrypted_content``; without it, a reasoning item from a stored response is sent as an
``item_reference`` to its id (the server keeps the items of stored responses). Plaintext reasoning is never
sent.

Output items geppetto does not model (hosted tools such as web search) are kept as ``other`` blocks
holding the raw item under ``payload["item"]``; the ones the server completes itself are replayed as
they came, the others (calls that would need an output from the client) are never sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from geppetto._json import dumps
from geppetto.providers._files import responses_file_parts
from geppetto.turns import (
    BLOCK_META_RESPONSE_ID,
    PAYLOAD_ARGS,
    PAYLOAD_ENCRYPTED_CONTENT,
    PAYLOAD_ERROR,
    PAYLOAD_ID,
    PAYLOAD_IMAGES,
    PAYLOAD_ITEM,
    PAYLOAD_ITEM_ID,
    PAYLOAD_NAME,
    PAYLOAD_PHASE,
    PAYLOAD_RESULT,
    PAYLOAD_SUMMARY,
    PAYLOAD_TEXT,
    Block,
    BlockKind,
    BuiltinTool,
    FrozenBlock,
    block_meta_key,
    result_text,
)

__all__ = [
    "PAYLOAD_CONTENT",
    "PAYLOAD_STANDALONE",
    "REPLAYABLE_ITEM_TYPES",
    "RESPONSE_BLOCKS",
    "arguments_text",
    "block_identity",
    "blocks_to_items",
    "builtin_of_item",
    "items_bytes",
    "mark_standalone",
    "message_extras",
    "reasoning_extras",
    "replayed",
    "replayed_message_parts",
    "replayed_reasoning",
    "replayed_reasoning_parts",
    "server_compaction",
    "tool_output_text",
]


REPLAYABLE_ITEM_TYPES = frozenset(
    {
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "compaction",
    }
)
"""Unmodelled output items the server completes itself; they are replayed as they came."""

_STALE = "geppetto.reasoning_stale@v1"
"""The prefix guard's mark on reasoning it left out for good (``providers._prefix_guard.REASONING_STALE``)."""

RESPONSE_BLOCKS = block_meta_key("openai", "response_blocks", 1, int)
"""``openai.response_blocks@v1``: how many blocks the stored response produced (on each of them).

Written only for responses the server stored, so it also marks blocks whose items can be referenced by id.
"""


def arguments_text(args: Any) -> str:
    """Tool-call arguments as the JSON string the API carries (a raw string passes through)."""
    if isinstance(args, str):
        return args
    return _ARGS_JSON(args if args is not None else {})


def compact_json(*, sort_keys: bool) -> Callable[[Any], str]:
    """``json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=...).encode`` for JSON values,
    without making the C encoder again on every call (most of the cost of encoding a small value), which
    matters where every block of a Turn just loaded is encoded at once. Values come from JSON, so there is
    no check for cycles. Where the C encoder is missing, or writes other text, it is the plain encoder."""
    plain = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys).encode
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython has it
        return plain

    def default(value: Any) -> Any:
        raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

    try:
        encode = make(None, default, json.encoder.encode_basestring, None, ":", ",", sort_keys, False, True)
    except TypeError:  # pragma: no cover - another signature
        return plain

    def fast(value: Any) -> str:
        if isinstance(value, str):  # the C encoder takes containers; a bare string is one escape
            return json.encoder.encode_basestring(value)
        return "".join(encode(value, 0))

    sample = {"b": [1, 1.5, "é\n\u2028", None, True, {"z": {}, "a": []}], "a": -0.0}
    return fast if fast(sample) == plain(sample) and fast("x") == plain("x") else plain


_ARGS_JSON = compact_json(sort_keys=False)


def tool_output_text(block: Block) -> str:
    """A tool_use block as the ``output`` string; an error travels as ``{"error": ..., "result": ...}``."""
    result = block.payload.get(PAYLOAD_RESULT)
    error = block.payload.get(PAYLOAD_ERROR)
    if error is None:
        return result_text(result) if result is not None else ""
    body: dict[str, Any] = {"error": error}
    if result is not None:
        body["result"] = result
    return json.dumps(body, ensure_ascii=False)


def _image_part(image: Any) -> dict[str, Any]:
    if isinstance(image, str):
        return {"type": "input_image", "image_url": image, "detail": "auto"}
    part: dict[str, Any] = {"type": "input_image", "detail": image.get("detail") or "auto"}
    if image.get("url"):
        part["image_url"] = image["url"]
    elif image.get("file_id"):
        part["file_id"] = image["file_id"]
    elif image.get("data"):
        mime = image.get("media_type") or image.get("mime_type") or "image/png"
        part["image_url"] = f"data:{mime};base64,{image['data']}"
    return part


def _message(role: str, block: Block) -> dict[str, Any]:
    images = block.payload.get(PAYLOAD_IMAGES) or []
    files = responses_file_parts(block) if role == "user" else []
    if not images and not files:
        return {"role": role, "content": block.text}
    content: list[dict[str, Any]] = [{"type": "input_text", "text": block.text}] if block.text else []
    content.extend(_image_part(img) for img in images)
    return {"role": role, "content": [*content, *files]}


def _system_role(block: Block) -> str:
    return "developer" if block.role == "developer" else "system"


def _raw_item(block: Block) -> dict[str, Any] | None:
    """The replayable raw item of an ``other`` block, else None."""
    item = block.payload.get(PAYLOAD_ITEM)
    if isinstance(item, dict) and item.get("type") in REPLAYABLE_ITEM_TYPES and item.get("id"):
        if item["type"] == "compaction":  # the input form: what the output item adds (created_by) is not sent
            return {k: item[k] for k in _COMPACTION_KEYS if k in item}
        return item
    return None


_COMPACTION_KEYS = ("type", "id", "encrypted_content")


def server_compaction(block: Block) -> bool:
    """True for the ``compaction`` item an in-request compaction (``context_management``) put in a
    response's output: it carries the response's id. From it on, the server holds only it and what
    follows; a ``/responses/compact`` item (no response id) summarizes only the blocks it replaced."""
    if block.kind is not BlockKind.OTHER or not BLOCK_META_RESPONSE_ID.get(block.metadata):
        return False
    item = block.payload.get(PAYLOAD_ITEM)
    return isinstance(item, dict) and item.get("type") == "compaction"


def replayed(blocks: Sequence[Block]) -> list[Block]:
    """The blocks a whole-Turn request sends: from the latest server compaction on (what came before it
    is folded into it and dropped), else all of them."""
    for i in range(len(blocks) - 1, -1, -1):
        if server_compaction(blocks[i]):
            return list(blocks[i:])
    return list(blocks)


def _reasoning_item(block: Block) -> dict[str, Any]:
    encrypted = block.payload.get(PAYLOAD_ENCRYPTED_CONTENT)
    if not encrypted:
        return {"type": "item_reference", "id": block.payload[PAYLOAD_ITEM_ID]}
    summary = block.payload.get(PAYLOAD_SUMMARY) or []
    if isinstance(summary, str):
        summary = [summary]
    item = {
        "type": "reasoning",
        "id": block.payload[PAYLOAD_ITEM_ID],
        "summary": [{"type": "summary_text", "text": str(s)} for s in summary],
        "encrypted_content": encrypted,
    }
    content = replayed_reasoning_parts(block)
    if content:
        item["content"] = content
    return item


def _replayable_reasoning(block: Block, follower: Block | None, references: bool, stale: frozenset[str]) -> bool:
    if not block.payload.get(PAYLOAD_ITEM_ID) or follower is None or block.id in stale:
        return False
    if block.metadata.get(_STALE):  # the prefix guard left it out for good
        return False
    if BLOCK_META_RESPONSE_ID.get(block.metadata) != BLOCK_META_RESPONSE_ID.get(follower.metadata):
        return False  # another response's item: the server pairs each item with its own reasoning
    # Without encrypted content it goes by reference: only items of a stored response can (404 otherwise).
    stored = references and RESPONSE_BLOCKS.has(block.metadata)
    if not block.payload.get(PAYLOAD_ENCRYPTED_CONTENT) and not stored:
        return False
    if follower.kind is BlockKind.TOOL_CALL:
        return bool(follower.payload.get(PAYLOAD_ITEM_ID))
    if follower.kind is BlockKind.OTHER:
        return _raw_item(follower) is not None
    return (
        follower.kind is BlockKind.LLM_TEXT
        and bool(follower.text.strip())
        and bool(follower.payload.get(PAYLOAD_ITEM_ID))
    )


def _assistant(block: Block, with_id: bool) -> dict[str, Any] | None:
    """An assistant message: with its id in the output form (its kept content parts, annotations and all),
    else as an easy input message (text only: that form has no place for annotations); ``phase`` on both."""
    if not block.text.strip():
        return None
    phase = block.payload.get(PAYLOAD_PHASE)
    if with_id:
        parts = replayed_message_parts(block)
        item: dict[str, Any] = {
            "type": "message",
            "id": block.payload[PAYLOAD_ITEM_ID],
            "role": "assistant",
            "status": "completed",
            "content": parts or [{"type": "output_text", "text": block.text, "annotations": [], "logprobs": []}],
        }
    else:
        item = {"role": "assistant", "content": block.text}
    if isinstance(phase, str):
        item["phase"] = phase
    return item


def _function_call(block: Block, with_id: bool) -> dict[str, Any] | None:
    if not block.payload.get(PAYLOAD_ID) or not block.payload.get(PAYLOAD_NAME):
        return None
    item: dict[str, Any] = {
        "type": "function_call",
        "call_id": str(block.payload[PAYLOAD_ID]),
        "name": str(block.payload[PAYLOAD_NAME]),
        "arguments": arguments_text(block.payload.get(PAYLOAD_ARGS)),
    }
    if with_id:
        item["id"] = block.payload[PAYLOAD_ITEM_ID]
    return item


def _item(block: Block, *, with_id: bool, include_system: bool) -> dict[str, Any] | None:
    kind = block.kind
    if kind is BlockKind.SYSTEM:
        return _message(_system_role(block), block) if include_system else None
    if kind is BlockKind.USER:
        return _message("user", block)
    if kind is BlockKind.LLM_TEXT:
        return _assistant(block, with_id)
    if kind is BlockKind.TOOL_CALL:
        return _function_call(block, with_id)
    if kind is BlockKind.TOOL_USE:
        if not block.payload.get(PAYLOAD_ID):
            return None
        return {
            "type": "function_call_output",
            "call_id": str(block.payload[PAYLOAD_ID]),
            "output": tool_output_text(block),
        }
    if kind is BlockKind.OTHER:
        return _raw_item(block)
    return None


def blocks_to_items(
    blocks: Sequence[Block],
    *,
    include_system: bool = True,
    references: bool = True,
    stale: frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    """The input items for ``blocks``, in order, following the pairing rules above.

    ``references=False`` never sends an ``item_reference``: reasoning without ``encrypted_content`` is
    then dropped (its follower goes without its id). The reasoning blocks whose ids are in ``stale``
    (the prefix guard's) are left out the same way.
    """
    items: list[dict[str, Any]] = []
    for block, reasoning, with_id in _planned(blocks, references, stale):
        item = _reasoning_item(block) if reasoning else _item(block, with_id=with_id, include_system=include_system)
        if item is not None:
            items.append(item)
    return items


def _planned(
    blocks: Sequence[Block], references: bool, stale: frozenset[str] = frozenset()
) -> Iterator[tuple[Block, bool, bool]]:
    """The blocks that may become items, each with whether it goes as a reasoning item and whether it
    carries its id (it follows the reasoning it pairs with, or is a message with kept parts that is
    standalone or in the run of its response's blocks that a replayed reasoning began, see the parts below)."""
    paired_follower = -1
    reasoned: Any = None  # the response whose replayed reasoning began the run of its blocks this one is in
    for i, block in enumerate(blocks):
        response = BLOCK_META_RESPONSE_ID.get(block.metadata)
        if response is None or response != reasoned:
            reasoned = None
        if block.kind is BlockKind.REASONING:
            follower = blocks[i + 1] if i + 1 < len(blocks) else None
            if _replayable_reasoning(block, follower, references, stale):
                yield block, True, False
                paired_follower = i + 1
                reasoned = response
            else:
                reasoned = None
            continue
        yield (
            block,
            False,
            i == paired_follower or (references and _standalone(block)) or (reasoned is not None and _kept(block)),
        )


def replayed_reasoning(blocks: Sequence[Block]) -> list[Block]:
    """The reasoning blocks of ``blocks`` that go out as reasoning items (or references to them)."""
    return [block for block, reasoning, _ in _planned(blocks, True) if reasoning]


def _kept(block: Block) -> bool:
    """A message with kept parts (annotations, several parts) and its id."""
    return (
        block.kind is BlockKind.LLM_TEXT
        and PAYLOAD_CONTENT in block.payload
        and bool(block.payload.get(PAYLOAD_ITEM_ID))
    )


def _standalone(block: Block) -> bool:
    """A message with kept parts that needs no reasoning item, of a stored response: it goes with its id."""
    return (
        block.kind is BlockKind.LLM_TEXT
        and block.payload.get(PAYLOAD_STANDALONE) is True
        and bool(block.payload.get(PAYLOAD_ITEM_ID))
        and RESPONSE_BLOCKS.has(block.metadata)
    )


def items_bytes(blocks: Sequence[Block], *, include_system: bool = True) -> int:
    """The bytes of :func:`blocks_to_items` as a request's ``input`` array (compact JSON, UTF-8), without
    building it again for blocks measured before: a frozen block (shared by a session's snapshots, never
    changed) remembers the size of its item."""
    total, count = items_sizes(blocks, include_system=include_system)
    return 2 + total + max(count - 1, 0)


def items_sizes(blocks: Sequence[Block], *, include_system: bool = True) -> tuple[int, int]:
    """The summed sizes of :func:`blocks_to_items`' items and their count (see :func:`items_bytes`).

    The figures of ``blocks[:q]`` are part of those of any longer list when ``blocks[q - 1]`` is not
    reasoning (only reasoning looks at the block after it), and those of ``blocks[q:]`` part of those of
    the whole list when also no reasoning is in the run of blocks of ``blocks[q - 1]``'s response that ends
    there (a message with kept parts looks back along that run): such sums may be added up piece by piece."""
    total, count = 0, 0
    for block, reasoning, with_id in _planned(blocks, True):
        key = (reasoning, with_id, include_system)
        memo = block.__dict__.setdefault("item_bytes", {}) if type(block) is FrozenBlock else None
        size = memo.get(key) if memo is not None else None
        if size is None:
            item = _reasoning_item(block) if reasoning else _item(block, with_id=with_id, include_system=include_system)
            size = -1 if item is None else len(dumps(item, separators=(",", ":"), ensure_ascii=False).encode())
            if memo is not None:
                memo[key] = size
        if size >= 0:
            total, count = total + size, count + 1
    return total, count


def block_identity(block: Block, *, include_system: bool = True) -> Any:
    """What the server holds for this block, in a canonical form for fingerprints; None when never sent.

    Reasoning counts by its item id (the server stores the item it produced, whether it travels
    encrypted or by reference); other kinds count by their stand-alone wire item.
    """
    if block.kind is BlockKind.REASONING:
        if not block.payload.get(PAYLOAD_ITEM_ID) or block.metadata.get(_STALE):
            return None  # never sent, or left out by the prefix guard: not part of the server's context
        return {"type": "reasoning", "id": block.payload[PAYLOAD_ITEM_ID]}
    return _item(block, with_id=False, include_system=include_system)


def content_text(content: Any) -> str:
    """The text of an item's ``content`` (or an output's): a string as it is, else its parts' text or refusal."""
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text") or p.get("refusal") or "") for p in content or [] if isinstance(p, dict))


def message_text(item: dict[str, Any]) -> str:
    return content_text(item.get("content"))


# -- parts ---------------------------------------------------------------------------------------------------
# What a Responses output item carries besides its text, kept on its block and replayed as it came:
# a message's ``phase`` (``commentary`` / ``final_answer``, gpt-5.x) and its content parts with their
# annotations (citations), a reasoning item's ``reasoning_text`` content parts.
#
# A message with kept parts is replayed in its output form, with its id, where that is safe: right after
# the reasoning it pairs with; after the blocks of its response that the replayed reasoning of that
# response began (reasoning, a hosted call, then its message: code interpreter's shape, where the reasoning
# pairs with the call and the server finds it in the input); or when no reasoning came before it in its
# response (``standalone``: the server needs no reasoning item with it) and the server stored that
# response. Elsewhere it goes as an easy input message, whose form has no place for annotations (the easy
# form's content takes input parts only): text and ``phase`` only.
#
# Kept parts are replayed only while the block's text is still theirs: a block whose text was changed
# replays its text alone (the parts would contradict it).


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


# -- hosted --------------------------------------------------------------------------------------------------
# Hosted (built-in) tool output items typed for users: what each call was and what it found.
#
# The raw item stays the block's ``payload["item"]`` and is what goes back; ``payload["builtin"]`` (see
# :mod:`geppetto.turns._builtin`) says which tool it was, its input and its sources in one vocabulary
# with Claude's and Gemini's built-in tools. A hosted call item is both the call and its result.


_TOOLS = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_execution",
    "image_generation_call": "image_generation",
    "mcp_call": "mcp",
    "mcp_list_tools": "mcp",
    "local_shell_call": "shell",
}


def _input(item: dict[str, Any]) -> Any:
    kind = item.get("type")
    if kind == "web_search_call":
        return item.get("action")
    if kind == "file_search_call":
        return item.get("queries")
    if kind == "code_interpreter_call":
        return item.get("code")
    if kind == "mcp_call":
        return item.get("arguments")
    return None


def _sources(item: dict[str, Any]) -> list[dict[str, Any]]:
    action = item.get("action")
    found = (action.get("sources") if isinstance(action, dict) else None) or item.get("results") or []
    return [
        {"url": str(s.get("url") or s.get("filename") or ""), "title": str(s.get("title") or s.get("filename") or "")}
        for s in found
        if isinstance(s, dict)
    ]


def builtin_of_item(item: dict[str, Any]) -> BuiltinTool | None:
    """The hosted tool call an output item is, else None."""
    tool = _TOOLS.get(str(item.get("type") or ""))
    if tool is None:
        return None
    info = BuiltinTool(tool=tool, phase="call", call_id=str(item.get("id") or ""))
    if item.get("name") or item.get("server_label"):
        info["name"] = str(item.get("name") or item.get("server_label"))
    value = _input(item)
    if value is not None:
        info["input"] = value
    output = item.get("output") if item.get("type") == "mcp_call" else item.get("outputs")
    if output is not None:
        info["output"] = output
    if item.get("error") or item.get("status") == "failed":
        info["error"] = True
    sources = _sources(item)
    if sources:
        info["sources"] = sources
    return info
