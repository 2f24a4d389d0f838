"""Prompt caching on Claude: ``cache_control`` breakpoints where a cache pays.

Claude caches a prompt's prefix up to each block marked ``cache_control`` (at most four marks a request)
and bills a cache write at 1.25x the input rate and a read at 0.1x; a prefix shorter than the model's
minimum (1,024 tokens for most models) is never cached. The engine marks, by default:

1. the system prompt's last block (or the last tool when there is no system prompt): tools and system;
2. the last block of the last message: the whole prefix, read back by the next request of a tool loop or
   a conversation;
3. the last block of the user message before it: the prefix the previous request wrote, so a request whose
   new part is longer than the service's 20-block look-back still reads it.

``prompt_cache="auto"`` (default) marks only when the prompt is at least :data:`CACHE_MIN_TOKENS` by an
estimate (a smaller one cannot be cached, and a mark would only say so); ``True`` always marks; ``False``
never does.
"""

from __future__ import annotations

from typing import Any

from ..._json import dumps

__all__ = ["CACHE_MIN_TOKENS", "MAX_BREAKPOINTS", "add_cache_breakpoints"]

CACHE_MIN_TOKENS = 1024
"""The shortest prefix Claude caches (Sonnet and Opus; Haiku's is 2,048)."""
MAX_BREAKPOINTS = 4
_MARK = {"type": "ephemeral"}
_UNMARKABLE = ("thinking", "redacted_thinking")


def _mark_last(blocks: list[dict[str, Any]]) -> bool:
    for i in range(len(blocks) - 1, -1, -1):
        if isinstance(blocks[i], dict) and blocks[i].get("type") not in _UNMARKABLE:
            blocks[i] = {**blocks[i], "cache_control": _MARK}
            return True
    return False


def add_cache_breakpoints(body: dict[str, Any], mode: bool | str = "auto") -> dict[str, Any]:
    """Mark ``body`` (a Messages request, changed in place and returned) for caching as ``mode`` says."""
    if mode is False or mode == "off":
        return body
    if mode == "auto":
        size = len(dumps([body.get("tools"), body.get("system"), body.get("messages")])) // 4
        if size < CACHE_MIN_TOKENS:
            return body
    used = 0
    system = body.get("system")
    if isinstance(system, str) and system:
        system = body["system"] = [{"type": "text", "text": system}]
    if (isinstance(system, list) and system and _mark_last(system)) or (
        body.get("tools") and _mark_last(body["tools"])
    ):
        used += 1
    messages = body.get("messages") or []
    if messages and _mark_last(_content(messages[-1])):
        used += 1
    for message in reversed(messages[:-1]):
        if used >= MAX_BREAKPOINTS:
            break
        if message.get("role") == "user":
            _mark_last(_content(message))
            break
    return body


def _content(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        content = message["content"] = [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []
