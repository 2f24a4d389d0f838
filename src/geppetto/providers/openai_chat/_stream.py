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

from geppetto._json import parse_json

from ..._exceptions import StreamError
from ..._json import dumps
from ...events import (
    STOP_CONTENT_FILTER,
    STOP_END,
    STOP_MAX_TOKENS,
    STOP_OTHER,
    STOP_TOOL_CALLS,
    Usage,
)
from ...turns import PAYLOAD_ARGS, PAYLOAD_CITATIONS, PAYLOAD_EXTRA, PAYLOAD_LOGPROBS, Block
from .._http_errors import error_from_response, openai_error_info
from .._sse import SSEEvent, malformed
from .._stream_loop import Delta, StreamResult
from .._streaming import new_call_id, parse_args
from ._dialect import PROVIDER

__all__ = ["ChatStreamReducer", "chat_stop_reason", "chat_usage", "completion_events"]

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
    extra: dict[str, Any] = field(default_factory=dict)


_DELTA_FIELDS = frozenset(
    {"role", "content", "refusal", "reasoning", "reasoning_content", "tool_calls", "annotations", "function_call"}
)
_FRAGMENT_FIELDS = frozenset({"index", "id", "type", "function"})


def completion_events(completion: dict[str, Any]) -> list[SSEEvent]:
    """The chunks a stream of the whole ``chat.completion`` would carry: one with each choice's message as
    its delta (tool calls numbered), then ``[DONE]``."""
    choices = []
    for choice in completion.get("choices") or []:
        delta = dict(choice.get("message") or {})
        if delta.get("tool_calls"):
            delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(delta["tool_calls"])]
        choices.append({**{k: v for k, v in choice.items() if k != "message"}, "delta": delta})
    chunk = {**completion, "object": "chat.completion.chunk", "choices": choices}
    return [SSEEvent("", dumps(chunk)), SSEEvent("", "[DONE]")]


def _call_block(call: _Call, server: str) -> Block:
    """A finished call; what it carried beyond geppetto's fields kept under ``payload["extra"]``: the
    arguments text when it differs from how geppetto writes them, the call's unnamed fields."""
    sent = "".join(call.arguments)
    block = Block.tool_call(call.id or new_call_id(), call.name, parse_args(sent))
    args = block.payload[PAYLOAD_ARGS]
    extra: dict[str, Any] = {}
    if sent and not isinstance(args, str) and sent != json.dumps(args, ensure_ascii=False):
        extra["arguments"] = sent  # the text as sent, to send back as it came
    if call.extra:
        extra.update({"call": call.extra, "server": server})
    if extra:
        block.payload[PAYLOAD_EXTRA] = extra
    return block


class ChatStreamReducer:
    """Reduces one Chat Completions stream (choice 0) to reasoning, text and tool_call blocks."""

    def __init__(self, server: str = "") -> None:
        self.server = server
        """The base URL of the server streaming: unnamed fields go back only to it."""
        self.finished = False
        self.response_id = ""
        self.model = ""
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _Call] = {}
        self._finish_reason: str | None = None
        self._usage: Usage | None = None
        self._chunks = 0
        self._annotations: list[Any] = []
        self._logprobs: list[Any] = []
        self._message_extra: dict[str, Any] = {}
        """Message fields geppetto has no name for (Gemini's ``extra_content`` / ``thought_signature``)."""

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
            logprobs = choice.get("logprobs")
            if isinstance(logprobs, dict):
                self._logprobs.extend(logprobs.get("content") or logprobs.get("refusal") or [])
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
        return out

    def _delta(self, delta: dict[str, Any]) -> list[Delta]:
        out: list[Delta] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self._reasoning.append(reasoning)
            out.append(("reasoning", reasoning))
        for content in (delta.get("content"), delta.get("refusal")):  # a refusal is the answer's text
            if isinstance(content, str) and content:
                self._text.append(content)
                out.append(("text", content))
        self._annotations.extend(delta.get("annotations") or [])
        self._message_extra.update({k: v for k, v in delta.items() if k not in _DELTA_FIELDS and v is not None})
        for fragment in delta.get("tool_calls") or []:
            call = self._calls.setdefault(self._index(fragment), _Call())
            call.id = call.id or str(fragment.get("id") or "")
            function = fragment.get("function") or {}
            call.name = call.name or str(function.get("name") or "")
            if function.get("arguments"):
                call.arguments.append(str(function["arguments"]))
            call.extra.update({k: v for k, v in fragment.items() if k not in _FRAGMENT_FIELDS and v is not None})
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
            if self._annotations:
                blocks[-1].payload[PAYLOAD_CITATIONS] = self._annotations
            if self._logprobs:
                blocks[-1].payload[PAYLOAD_LOGPROBS] = self._logprobs
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call.name:
                raise StreamError(
                    f"tool call {index} arrived without a name", received=self._received(), provider=PROVIDER
                )
            blocks.append(_call_block(call, self.server))
        if blocks and self._message_extra:
            extra = blocks[0].payload.setdefault(PAYLOAD_EXTRA, {})
            extra.update({"message": self._message_extra, "server": self.server})
        stop = chat_stop_reason(self._finish_reason, bool(self._calls))
        return StreamResult(blocks, self._usage, stop, self.response_id)

    def completed_blocks(self) -> list[Block]:
        # Nothing in a chat stream is complete before its finish_reason.
        return []
