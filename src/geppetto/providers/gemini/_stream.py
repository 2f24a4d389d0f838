"""Gemini stream: ``streamGenerateContent?alt=sse`` chunks reduced to blocks.

Each ``data:`` line is a whole ``GenerateContentResponse``. Text and thought parts are deltas and merge
into one block per run; function calls arrive whole. A ``thoughtSignature`` stays on the block made
from its part (a signature on an empty text part joins the text run it ends), so it can be replayed
exactly. Every other part (code execution, server tools, images, a bare signature) is kept whole as an
``other`` block (see :mod:`._parts`). The stream is complete once a candidate carries a ``finishReason``.
"""

from __future__ import annotations

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
from ...turns import PAYLOAD_CITATIONS, PAYLOAD_EXTRA, PAYLOAD_LOGPROBS, PAYLOAD_THOUGHT_SIGNATURE, Block, BlockKind
from .._http_errors import error_from_response, gemini_error_info
from .._sse import SSEEvent, malformed
from .._stream_loop import Delta, StreamResult
from .._streaming import new_call_id
from ._parts import CITATION_FIELDS, LOGPROB_FIELDS, PROVIDER, kept_part

__all__ = ["GeminiStreamReducer", "gemini_stop_reason", "gemini_usage"]

_FILTERED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "LANGUAGE"}


def gemini_stop_reason(finish_reason: str, has_calls: bool) -> str:
    """Gemini's ``finishReason`` in the shared vocabulary (``STOP`` after function calls is ``tool_calls``)."""
    if finish_reason == "STOP":
        return STOP_TOOL_CALLS if has_calls else STOP_END
    if finish_reason == "MAX_TOKENS":
        return STOP_MAX_TOKENS
    if finish_reason in _FILTERED:
        return STOP_CONTENT_FILTER
    return STOP_OTHER


def gemini_usage(raw: dict[str, Any]) -> Usage:
    """Usage from ``usageMetadata``; output counts thoughts too (as OpenAI's does), reasoning only thoughts."""
    thoughts = int(raw.get("thoughtsTokenCount") or 0)
    return Usage(
        input_tokens=int(raw.get("promptTokenCount") or 0) + int(raw.get("toolUsePromptTokenCount") or 0),
        output_tokens=int(raw.get("candidatesTokenCount") or 0) + thoughts,
        cached_tokens=int(raw.get("cachedContentTokenCount") or 0),
        reasoning_tokens=thoughts,
    )


_TEXT_FIELDS = frozenset({"text", "thought", "thoughtSignature"})


@dataclass
class _Segment:
    kind: str  # "text" | "thought" | "call" | "raw" (a part kept as it came)
    text: list[str] = field(default_factory=list)
    signature: str = ""
    call: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


class GeminiStreamReducer:
    """Reduces one Gemini stream (candidate 0) to reasoning, text and tool_call blocks in part order."""

    def __init__(self) -> None:
        self.finished = False
        self.response_id = ""
        self.model = ""
        self._segments: list[_Segment] = []
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] = {}
        self._chunks = 0
        self._candidate: dict[str, Any] = {}

    def feed(self, event: SSEEvent) -> list[Delta]:
        try:
            chunk = event.json()
        except ValueError as exc:
            raise StreamError(
                malformed("chunk", event.data, exc), received=self._received(), provider=PROVIDER
            ) from exc
        if isinstance(chunk, list) and chunk:
            chunk = chunk[0]
        if not isinstance(chunk, dict):
            raise StreamError(f"unexpected chunk {event.data[:200]!r}", received=self._received(), provider=PROVIDER)
        if isinstance(chunk.get("error"), dict):
            code = chunk["error"].get("code")
            status = code if isinstance(code, int) else 500
            raise error_from_response(status, event.data, {}, provider=PROVIDER, parser=gemini_error_info)
        self._chunks += 1
        self.response_id = self.response_id or str(chunk.get("responseId") or "")
        self.model = self.model or str(chunk.get("modelVersion") or "")
        if isinstance(chunk.get("usageMetadata"), dict):
            self._usage = chunk["usageMetadata"]
        candidates = chunk.get("candidates") or []
        if not candidates and (chunk.get("promptFeedback") or {}).get("blockReason"):
            self._finish_reason = "SAFETY"
            return []
        out: list[Delta] = []
        for candidate in candidates:
            if candidate.get("index", 0) != 0:
                continue
            for part in (candidate.get("content") or {}).get("parts") or []:
                out.extend(self._part(part))
            self._candidate.update({k: v for k, v in candidate.items() if k in CITATION_FIELDS + LOGPROB_FIELDS})
            if candidate.get("finishReason"):
                self._finish_reason = str(candidate["finishReason"])
        return out

    def _part(self, part: dict[str, Any]) -> list[Delta]:
        signature = str(part.get("thoughtSignature") or "")
        if isinstance(part.get("functionCall"), dict):
            extra = {k: v for k, v in part.items() if k not in ("functionCall", "thoughtSignature")}
            self._segments.append(_Segment("call", signature=signature, call=part["functionCall"], extra=extra))
            return []
        if "text" not in part:
            # Code execution, server tools, images, a bare signature...: kept whole, signature on it.
            self._segments.append(_Segment("raw", call=part))
            return []
        kind = "thought" if part.get("thought") else "text"
        text = str(part.get("text") or "")
        extra = {k: v for k, v in part.items() if k not in _TEXT_FIELDS}  # fields geppetto has no name for
        last = self._segments[-1] if self._segments else None
        if last is None or last.kind != kind or last.signature or last.extra or extra:
            last = _Segment(kind, extra=extra)
            self._segments.append(last)
        last.text.append(text)
        if signature:
            last.signature = signature  # the run ends here: a signed part is never joined by another
        if not text:
            return []
        return [("reasoning" if kind == "thought" else "text", text)]

    def _received(self) -> str:
        calls = [str(s.call.get("name") or "?") for s in self._segments if s.kind == "call"]
        text = sum(len("".join(s.text)) for s in self._segments if s.kind == "text")
        parts = [f"{self._chunks} chunks", f"{text} characters of text"]
        if calls:
            parts.append(f"tool calls not yet confirmed by a finishReason ({', '.join(calls)})")
        return ", ".join(parts)

    def _block(self, segment: _Segment) -> Block:
        if segment.kind == "raw":
            return kept_part(segment.call)
        if segment.kind == "call":
            call = segment.call
            args = call.get("args")
            block = Block.tool_call(
                str(call.get("id") or new_call_id()),
                str(call.get("name") or ""),
                args if isinstance(args, dict) else {},
            )
        elif segment.kind == "thought":
            block = Block.reasoning("".join(segment.text))
        else:
            block = Block.llm_text("".join(segment.text))
        if segment.signature:
            block.payload[PAYLOAD_THOUGHT_SIGNATURE] = segment.signature
        if segment.extra:
            block.payload[PAYLOAD_EXTRA] = segment.extra
        return block

    def result(self) -> StreamResult:
        if self._finish_reason is None:
            raise StreamError(
                "the Gemini stream ended before a finishReason; no tool call was run",
                received=self._received(),
                provider=PROVIDER,
            )
        blocks = [self._block(s) for s in self._segments]
        # Empty text is kept only when it carries a signature that must go back.
        blocks = [
            b for b in blocks if b.kind is not BlockKind.LLM_TEXT or b.text or b.payload.get(PAYLOAD_THOUGHT_SIGNATURE)
        ]
        self._annotate(blocks)
        has_calls = any(b.kind is BlockKind.TOOL_CALL for b in blocks)
        stop = gemini_stop_reason(self._finish_reason, has_calls)
        return StreamResult(blocks, gemini_usage(self._usage), stop, self.response_id)

    def _annotate(self, blocks: list[Block]) -> None:
        """The candidate's citations and logprobs on the last text block (they are about its text); an
        answer without text (a generated image) keeps its citations on its last kept part instead."""
        texts = [b for b in blocks if b.kind is BlockKind.LLM_TEXT]
        citations = {k: self._candidate[k] for k in CITATION_FIELDS if k in self._candidate}
        if not texts:
            kept = [b for b in blocks if b.kind is BlockKind.OTHER]
            if citations and kept:
                kept[-1].payload[PAYLOAD_CITATIONS] = citations  # output only: replay sends the part alone
            return
        logprobs = {k: self._candidate[k] for k in LOGPROB_FIELDS if k in self._candidate}
        if citations:
            texts[-1].payload[PAYLOAD_CITATIONS] = citations
        if logprobs:
            texts[-1].payload[PAYLOAD_LOGPROBS] = logprobs

    def completed_blocks(self) -> list[Block]:
        # Nothing is complete before the finishReason: text may still grow, calls may be retracted.
        return []
