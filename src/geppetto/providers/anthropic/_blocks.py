"""Claude content blocks geppetto does not model as its own kinds, kept and replayed as they came.

Server tools (``server_tool_use`` and the ``*_tool_result`` blocks: web search, web fetch, code execution,
tool search, advisor...), MCP (``mcp_tool_use`` / ``mcp_tool_result``), ``compaction``,
``container_upload`` and any block type Claude adds later become ``other`` blocks holding the block
(see :mod:`geppetto.turns._builtin`); the built-in tool ones are typed under ``payload["builtin"]``.
Claude needs them back: a ``pause_turn`` continuation resends the server tool call it paused in, and a
compacted conversation resends its ``compaction`` block. A text block's ``citations`` stay on its
``llm_text`` block and go back with it.

A whole (non-streamed) Message is read through the same reducer as a stream: :func:`message_events`
spells it as the events a stream of it would carry.
"""

from __future__ import annotations

from typing import Any

from ..._json import dumps
from ...turns import BLOCK_META_PROVIDER, PAYLOAD_ITEM, Block, BlockKind, BuiltinTool, raw_block
from .._sse import SSEEvent

__all__ = ["PROVIDER", "builtin_of_content", "kept_block", "message_events", "replay_content"]

PROVIDER = "anthropic"

_RESULT_SUFFIX = "_tool_result"
_TOOL_NAMES = {
    "bash_code_execution": "code_execution",
    "text_editor_code_execution": "code_execution",
    "code_execution": "code_execution",
    "web_search": "web_search",
    "web_fetch": "web_fetch",
}


def _sources(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return []
    return [
        {"url": str(r.get("url") or ""), "title": str(r.get("title") or "")}
        for r in content
        if isinstance(r, dict) and r.get("url")
    ]


def builtin_of_content(raw: dict[str, Any]) -> BuiltinTool | None:
    """The built-in tool call or result a Claude content block is, else None."""
    kind = str(raw.get("type") or "")
    if kind == "server_tool_use":
        name = str(raw.get("name") or "")
        return BuiltinTool(
            tool=_TOOL_NAMES.get(name, name),
            phase="call",
            call_id=str(raw.get("id") or ""),
            name=name,
            input=raw.get("input"),
        )
    if kind == "mcp_tool_use":
        return BuiltinTool(
            tool="mcp",
            phase="call",
            call_id=str(raw.get("id") or ""),
            name=str(raw.get("name") or ""),
            input=raw.get("input"),
        )
    if kind == "mcp_tool_result" or kind.endswith(_RESULT_SUFFIX):
        base = "mcp" if kind == "mcp_tool_result" else kind.removesuffix(_RESULT_SUFFIX)
        content = raw.get("content")
        info = BuiltinTool(tool=_TOOL_NAMES.get(base, base), phase="result", call_id=str(raw.get("tool_use_id") or ""))
        error = bool(raw.get("is_error")) or (
            isinstance(content, dict) and str(content.get("type", "")).endswith("_error")
        )
        if error:
            info["error"] = True
        sources = _sources(content)
        if sources:
            info["sources"] = sources
        if isinstance(content, dict):
            output = content.get("stdout") if "stdout" in content else content.get("content")
            if output is not None:
                info["output"] = output
        elif kind == "mcp_tool_result" and content is not None:
            info["output"] = content
        return info
    return None


def kept_block(raw: dict[str, Any]) -> Block:
    """An ``other`` block holding the content block ``raw`` exactly."""
    return raw_block(raw, builtin_of_content(raw))


def replay_content(block: Block) -> dict[str, Any] | None:
    """The content block an ``other`` block Claude produced goes back as; None for anything else."""
    item = block.payload.get(PAYLOAD_ITEM)
    if block.kind is not BlockKind.OTHER or BLOCK_META_PROVIDER.get(block.metadata) != PROVIDER:
        return None
    if not isinstance(item, dict) or not item.get("type"):
        return None
    return item


def message_events(message: dict[str, Any]) -> list[SSEEvent]:
    """The events a stream of the whole Message ``message`` would carry, in order."""
    head = {k: v for k, v in message.items() if k not in ("content", "stop_reason", "stop_sequence")}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**head, "content": [], "stop_reason": None, "stop_sequence": None}}
    ]
    for index, content in enumerate(message.get("content") or []):
        events.append({"type": "content_block_start", "index": index, "content_block": content})
        events.append({"type": "content_block_stop", "index": index})
    delta = {"stop_reason": message.get("stop_reason"), "stop_sequence": message.get("stop_sequence")}
    events.append({"type": "message_delta", "delta": delta, "usage": message.get("usage") or {}})
    events.append({"type": "message_stop"})
    return [SSEEvent(str(e["type"]), dumps(e)) for e in events]
