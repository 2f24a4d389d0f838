"""Chat Completions stream: ``chat.completion.chunk`` events reduced to blocks.

Text arrives in ``delta.content``, DeepSeek-style reasoning in ``delta.reasoning_content`` (some servers
call it ``delta.reasoning``), and tool calls in fragments keyed by ``index``: the first fragment of an
index carries ``id`` and ``function.name``, later ones only more ``function.arguments``. The stream is
complete once a ``finish_reason`` arrived; ``data: [DONE]`` ends it (the usage chunk comes in between).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..._exceptions import StreamError
from ...events import (
    STOP_CONTENT_FILTER,
    STOP_END,
    STOP_MAX_TOKENS,
    STOP_OTHER,
    STOP_TOOL_CALLS,
    Usage,
)
from ...turns import Block
from .._http import SSEEvent, error_from_response, malformed, openai_error_info, parse_json
from .._streaming import Delta, StreamResult, new_call_id, parse_args
from ._dialect import PROVIDER

__all__ = ["ChatStreamReducer", "chat_stop_reason", "chat_usage"]

_STOP = {
    "stop": STOP_END,
    "length": STOP_MAX_TOKENS,
    "tool_calls": STOP_TOOL_CALLS,
    "function_call": STOP_TOOL_CALLS,
    "content_filter": STOP_CONTENT_FILTER,
}


def chat_stop_reason(finish_reason: str, has_calls: bool) -> str:
    """``finish_reason`` in the shared vocabulary. Some compatible servers say ``stop`` after tool calls."""
    if has_calls and finish_reason in ("stop", "tool_calls", "function_call"):
        return STOP_TOOL_CALLS
    return _STOP.get(finish_reason, STOP_OTHER)


def chat_usage(raw: dict[str, Any]) -> Usage:
    """Usage from a Chat Completions ``usage`` object: cached tokens from ``prompt_tokens_details`` (or DeepSeek's
    ``prompt_cache_hit_tokens``), reasoning tokens from ``completion_tokens_details``."""
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    cached = prompt_details.get("cached_tokens") or raw.get("prompt_cache_hit_tokens")  # DeepSeek's name
    return Usage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or 0),
        cached_tokens=int(cached or 0),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
    )


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChatStreamReducer:
    """Reduces one Chat Completions stream (choice 0) to reasoning, text and tool_call blocks."""

    def __init__(self) -> None:
        self.finished = False
        self.response_id = ""
        self.model = ""
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _Call] = {}
        self._finish_reason: str | None = None
        self._usage: Usage | None = None
        self._chunks = 0

    def feed(self, event: SSEEvent) -> list[Delta]:
        data = event.data.strip()
        if data == "[DONE]":
            self.finished = True
            return []
        try:
            chunk = parse_json(data)
        except ValueError as exc:
            raise StreamError(malformed("chunk", data, exc), received=self._received(), provider=PROVIDER) from exc
        if not isinstance(chunk, dict):
            raise StreamError(f"unexpected chunk {data[:200]!r}", received=self._received(), provider=PROVIDER)
        if chunk.get("error"):
            status = chunk["error"].get("code") if isinstance(chunk["error"], dict) else None
            raise error_from_response(
                status if isinstance(status, int) else 500, data, {}, provider=PROVIDER, parser=openai_error_info
            )
        self._chunks += 1
        self.response_id = self.response_id or str(chunk.get("id") or "")
        self.model = self.model or str(chunk.get("model") or "")
        if isinstance(chunk.get("usage"), dict):
            self._usage = chat_usage(chunk["usage"])
        out: list[Delta] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            out.extend(self._delta(choice.get("delta") or {}))
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
        return out

    def _delta(self, delta: dict[str, Any]) -> list[Delta]:
        out: list[Delta] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)
            out.append(("reasoning", reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text.append(content)
            out.append(("text", content))
        for fragment in delta.get("tool_calls") or []:
            call = self._calls.setdefault(self._index(fragment), _Call())
            call.id = call.id or str(fragment.get("id") or "")
            function = fragment.get("function") or {}
            call.name = call.name or str(function.get("name") or "")
            if function.get("arguments"):
                call.arguments.append(str(function["arguments"]))
        return out

    def _index(self, fragment: dict[str, Any]) -> int:
        """The call a fragment belongs to. Servers that send whole calls may leave ``index`` out (or null): such a
        fragment, carrying an id or name, starts the next call; any other fragment without an index is refused."""
        index = fragment.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            return index
        function = fragment.get("function") or {}
        if index is None and (fragment.get("id") or function.get("name")):
            return max(self._calls, default=-1) + 1
        raise StreamError(
            f"tool call fragment with index {index!r}, so its arguments cannot be placed: {json.dumps(fragment)[:200]}",
            received=self._received(),
            provider=PROVIDER,
        )

    def _received(self) -> str:
        parts = [f"{self._chunks} chunks", f"{len(''.join(self._text))} characters of text"]
        if self._calls:
            names = ", ".join(c.name or "?" for c in self._calls.values())
            parts.append(f"unfinished tool calls ({names})")
        return ", ".join(parts)

    def result(self) -> StreamResult:
        if self._finish_reason is None:
            raise StreamError(
                "the chat completions stream ended before a finish_reason; no tool call was run",
                received=self._received(),
                provider=PROVIDER,
            )
        blocks: list[Block] = []
        if self._reasoning:
            blocks.append(Block.reasoning("".join(self._reasoning)))
        text = "".join(self._text)
        if text:
            blocks.append(Block.llm_text(text))
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call.name:
                raise StreamError(
                    f"tool call {index} arrived without a name", received=self._received(), provider=PROVIDER
                )
            blocks.append(Block.tool_call(call.id or new_call_id(), call.name, parse_args("".join(call.arguments))))
        stop = chat_stop_reason(self._finish_reason, bool(self._calls))
        return StreamResult(blocks, self._usage, stop, self.response_id)

    def completed_blocks(self) -> list[Block]:
        # Nothing in a chat stream is complete before its finish_reason.
        return []
