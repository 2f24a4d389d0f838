"""Anthropic Messages stream: ``message_start`` ... ``message_stop`` reduced to blocks.

Content blocks open with ``content_block_start``, grow with ``text_delta`` / ``thinking_delta`` /
``signature_delta`` / ``input_json_delta`` and close with ``content_block_stop``. Tool input arrives as
partial JSON and is parsed only when its block closes. ``message_delta`` carries the stop reason and
cumulative usage; ``error`` events raise the matching geppetto error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..._exceptions import ProviderError, StreamError
from ...events import (
    STOP_END,
    STOP_MAX_TOKENS,
    STOP_OTHER,
    STOP_PAUSE,
    STOP_REFUSAL,
    STOP_TOOL_CALLS,
    Usage,
)
from ...turns import PAYLOAD_CITATIONS, Block, BlockKind, with_extra
from .._http_errors import exception_class
from .._sse import SSEEvent, malformed
from .._stream_loop import Delta, StreamResult
from .._streaming import parse_args
from ._blocks import PROVIDER, kept_block
from ._container import container_of

__all__ = ["ClaudeStreamReducer", "claude_stop_reason", "claude_usage", "stream_error"]

_STOP = {
    "end_turn": STOP_END,
    "stop_sequence": STOP_END,
    "max_tokens": STOP_MAX_TOKENS,
    "model_context_window_exceeded": STOP_MAX_TOKENS,
    "tool_use": STOP_TOOL_CALLS,
    "pause_turn": STOP_PAUSE,
    "refusal": STOP_REFUSAL,
}

_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""The HTTP status Anthropic gives each error type; an error event maps as that status would."""


def claude_stop_reason(stop_reason: str | None) -> str:
    """Claude's ``stop_reason`` in the shared vocabulary."""
    return _STOP.get(stop_reason or "", STOP_OTHER)


def claude_usage(raw: dict[str, Any]) -> Usage:
    """Usage from Claude's ``usage``; input counts cache reads and writes too, as in every geppetto Usage."""
    cache_read = int(raw.get("cache_read_input_tokens") or 0)
    cache_write = int(raw.get("cache_creation_input_tokens") or 0)
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0) + cache_read + cache_write,
        output_tokens=int(raw.get("output_tokens") or 0),
        cached_tokens=cache_read,
        cache_write_tokens=cache_write,
    )


def stream_error(data: dict[str, Any]) -> ProviderError:
    """The geppetto error for an ``event: error`` payload, as its type's HTTP status maps (``overloaded_error`` ->
    ServerError 529, ``billing_error`` -> 402, ``request_too_large`` -> BadRequestError 413, ``timeout_error`` ->
    ServerError 504)."""
    raw = data.get("error")
    err: dict[str, Any] = raw if isinstance(raw, dict) else {}
    etype = str(err.get("type") or "error")
    status = _ERROR_STATUS.get(etype, 500)
    cls = exception_class(status, etype)
    message = str(err.get("message") or "the stream reported an error")
    return cls(
        message,
        status=status,
        provider=PROVIDER,
        code=etype,
        error_type=etype,
        request_id=data.get("request_id"),
        body=data,
    )


_TEXT_FIELDS = frozenset({"type", "text", "citations"})
_THINKING_FIELDS = frozenset({"type", "thinking", "signature"})
_TOOL_USE_FIELDS = frozenset({"type", "id", "name", "input"})


@dataclass
class _Open:
    """A content block between its start and stop events."""

    type: str
    start: dict[str, Any]
    text: list[str] = field(default_factory=list)
    signature: str = ""
    json: list[str] = field(default_factory=list)
    citations: list[Any] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def _assembled(block: _Open) -> dict[str, Any]:
    """A content block geppetto does not model, whole: its start with the streamed input parsed in and the
    string fields its other deltas carried appended (``compaction_delta``'s ``content``)."""
    whole = dict(block.start)
    if block.json:
        whole["input"] = parse_args("".join(block.json))
    for key, value in block.extra.items():
        before = whole.get(key)
        joinable = isinstance(value, str) and (before is None or isinstance(before, str))
        whole[key] = (before or "") + value if joinable else value
    return whole


class ClaudeStreamReducer:
    """Reduces one Messages stream to reasoning, text and tool_call blocks in content order."""

    def __init__(self) -> None:
        self.finished = False
        self.response_id = ""
        self.model = ""
        self._open: dict[int, _Open] = {}
        self._done: list[tuple[int, Block]] = []
        self._usage: dict[str, Any] = {}
        self._stop_reason: str | None = None
        self._events = 0
        self.input_transformations: list[Any] | None = None
        """What Claude changed in the request's input (``message_start``'s ``input_transformations``), if it said."""
        self.container: dict[str, Any] | None = None
        """The code-execution container the answer ran in (``message_delta``'s, or the whole Message's)."""
        self.diagnosed = False
        """Whether the answer carried ``diagnostics`` (cache diagnostics, on ``message_start``)."""
        self.diagnostics: Any = None
        """The answer's ``diagnostics`` as Claude sent it (``None``: nothing diverged, or not carried)."""

    def feed(self, event: SSEEvent) -> list[Delta]:
        try:
            data = event.json()
        except ValueError as exc:
            raise StreamError(
                malformed("event", event.data, exc), received=self._received(), provider=PROVIDER
            ) from exc
        if not isinstance(data, dict):
            raise StreamError(f"unexpected event {event.data[:200]!r}", received=self._received(), provider=PROVIDER)
        self._events += 1
        kind = data.get("type") or event.event
        if kind == "error":
            raise stream_error(data)
        if kind == "message_start":
            message = data.get("message") or {}
            self.response_id = str(message.get("id") or "")
            self.model = str(message.get("model") or "")
            self._usage.update(message.get("usage") or {})
            changed = message.get("input_transformations")
            if isinstance(changed, list):
                self.input_transformations = changed
            self.container = container_of(message) or self.container
            if "diagnostics" in message:
                self.diagnosed, self.diagnostics = True, message["diagnostics"]
        elif kind == "content_block_start":
            block = data.get("content_block") or {}
            self._open[int(data.get("index", 0))] = _Open(str(block.get("type") or ""), block)
        elif kind == "content_block_delta":
            return self._delta(int(data.get("index", 0)), data.get("delta") or {})
        elif kind == "content_block_stop":
            self._close(int(data.get("index", 0)))
        elif kind == "message_delta":
            self._stop_reason = (data.get("delta") or {}).get("stop_reason") or self._stop_reason
            self.container = container_of(data.get("delta")) or self.container
            self._usage.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self.finished = True
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[Delta]:
        block = self._open.get(index)
        if block is None:
            raise StreamError(
                f"delta for content block {index}, which never started", received=self._received(), provider=PROVIDER
            )
        dtype = delta.get("type")
        if dtype == "text_delta":
            block.text.append(str(delta.get("text") or ""))
            return [("text", block.text[-1])] if block.text[-1] else []
        if dtype == "thinking_delta":
            block.text.append(str(delta.get("thinking") or ""))
            return [("reasoning", block.text[-1])] if block.text[-1] else []
        if dtype == "signature_delta":
            block.signature += str(delta.get("signature") or "")
        elif dtype == "input_json_delta":
            block.json.append(str(delta.get("partial_json") or ""))
        elif dtype == "citations_delta":
            block.citations.append(delta.get("citation"))
        else:  # e.g. compaction_delta: its string fields grow the block's, others replace them
            for key, value in delta.items():
                if key != "type":
                    grown = block.extra.get(key, "")
                    block.extra[key] = grown + value if isinstance(value, str) and isinstance(grown, str) else value
        return []

    def _close(self, index: int) -> None:
        block = self._open.pop(index, None)
        if block is None:
            return
        start = block.start
        if block.type == "text":
            text = str(start.get("text") or "") + "".join(block.text)
            done = with_extra(Block.llm_text(text), start, _TEXT_FIELDS)
            citations = [*(start.get("citations") or []), *block.citations]
            if citations:
                done.payload[PAYLOAD_CITATIONS] = citations
            self._done.append((index, done))
        elif block.type == "thinking":
            text = str(start.get("thinking") or "") + "".join(block.text)
            signature = block.signature or str(start.get("signature") or "") or None
            self._done.append((index, with_extra(Block.reasoning(text, signature=signature), start, _THINKING_FIELDS)))
        elif block.type == "redacted_thinking":
            self._done.append((index, Block.reasoning(encrypted_content=str(start.get("data") or ""))))
        elif block.type == "tool_use":
            raw = "".join(block.json)
            args = parse_args(raw) if raw else start.get("input") or {}
            call = Block.tool_call(str(start.get("id") or ""), str(start.get("name") or ""), args)
            self._done.append((index, with_extra(call, start, _TOOL_USE_FIELDS)))
        else:  # server tools, MCP, compaction, ...: kept exactly, their streamed parts put in
            self._done.append((index, kept_block(_assembled(block))))

    def _received(self) -> str:
        parts = [f"{self._events} events", f"{len(self._done)} complete content blocks"]
        open_calls = [str(b.start.get("name") or "?") for b in self._open.values() if b.type == "tool_use"]
        if open_calls:
            parts.append(f"unfinished tool calls ({', '.join(open_calls)})")
        return ", ".join(parts)

    def result(self) -> StreamResult:
        if not self.finished or self._open:
            raise StreamError(
                "the messages stream ended before message_stop; no tool call was run",
                received=self._received(),
                provider=PROVIDER,
            )
        blocks = [b for _, b in sorted(self._done, key=lambda item: item[0])]
        return StreamResult(blocks, claude_usage(self._usage), claude_stop_reason(self._stop_reason), self.response_id)

    def completed_blocks(self) -> list[Block]:
        done = sorted(self._done, key=lambda item: item[0])
        return [b for _, b in done if b.kind is not BlockKind.TOOL_CALL]
