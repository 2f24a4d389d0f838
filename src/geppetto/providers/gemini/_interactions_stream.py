"""One Interactions stream (``interactions.create`` with ``stream``, or a resumed ``interactions.get``) as
blocks: ``step.start`` opens a step at its index, ``step.delta`` adds text, a thought's summary or
signature, or a call's arguments, ``step.stop`` closes it; ``interaction.created`` / ``.status_update`` /
``.completed`` carry the id, the status and the usage, ``error`` is the service's error. Every event's
``event_id`` is kept: a background interaction's broken stream is resumed after the last one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..._exceptions import ProviderError, StreamError
from ...events import STOP_END, STOP_MAX_TOKENS, STOP_OTHER, STOP_TOOL_CALLS, Usage
from ...turns import Block, BlockKind
from .._http_errors import error_from_response, gemini_error_info
from .._sse import SSEEvent, malformed
from .._stream_loop import Delta, StreamResult
from .._streaming import parse_args
from ._interactions_steps import PROVIDER, block_of_step

__all__ = ["ANCHORING_STATUSES", "InteractionsReducer", "interactions_usage", "whole_events"]

ANCHORING_STATUSES = frozenset({"completed", "requires_action", "incomplete"})
"""Statuses of an interaction whose steps the server keeps whole: only such an interaction anchors."""
_ENDS = frozenset({"interaction.completed", "error"})


def interactions_usage(raw: dict[str, Any] | None) -> Usage | None:
    """Usage from an interaction's ``usage``; output counts thoughts too (as the other engines' do)."""
    if not raw:
        return None
    thoughts = int(raw.get("total_thought_tokens") or 0)
    return Usage(
        input_tokens=int(raw.get("total_input_tokens") or 0) + int(raw.get("total_tool_use_tokens") or 0),
        output_tokens=int(raw.get("total_output_tokens") or 0) + thoughts,
        cached_tokens=int(raw.get("total_cached_tokens") or 0),
        reasoning_tokens=thoughts,
    )


@dataclass
class _Step:
    step: dict[str, Any]
    text: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)
    done: bool = False

    def final(self) -> dict[str, Any]:
        step = dict(self.step)
        kind = step.get("type")
        if self.text and kind == "model_output":
            step["content"] = [*(step.get("content") or []), {"type": "text", "text": "".join(self.text)}]
        elif self.text and kind == "thought":
            step["summary"] = [*(step.get("summary") or []), {"type": "text", "text": "".join(self.text)}]
        if self.arguments:
            step["arguments"] = parse_args("".join(self.arguments))
        return step


class InteractionsReducer:
    """Reduces one interaction's events to blocks in step order (see the module docstring)."""

    def __init__(self) -> None:
        self.finished = False
        self.response_id = ""
        self.status = ""
        self.last_event_id: str | None = None
        self.usage: dict[str, Any] | None = None
        self.model = ""
        self._steps: dict[int, _Step] = {}

    def feed(self, event: SSEEvent) -> list[Delta]:
        try:
            data = event.json()
        except ValueError as exc:
            raise StreamError(malformed("event", event.data, exc), provider=PROVIDER) from None
        if not isinstance(data, dict):
            raise StreamError(f"malformed event {event.data[:200]!r}", provider=PROVIDER)
        if data.get("event_id"):
            self.last_event_id = str(data["event_id"])
        kind = str(data.get("event_type") or event.event or "")
        if kind == "error":
            raise _error(data.get("error") or {})
        if kind in ("interaction.created", "interaction.completed"):
            self._interaction(data.get("interaction") or {})
        elif kind == "interaction.status_update":
            self.status = str(data.get("status") or self.status)
            self.response_id = self.response_id or str(data.get("interaction_id") or "")
            self.usage = data.get("usage") or self.usage
        elif kind == "step.start":
            self._steps[int(data.get("index") or 0)] = _Step(dict(data.get("step") or {}))
        elif kind == "step.delta":
            return self._delta(int(data.get("index") or 0), data.get("delta") or {})
        elif kind == "step.stop":
            step = self._steps.get(int(data.get("index") or 0))
            if step is not None:
                step.done = True
        if kind == "interaction.completed":
            self.finished = True
        return []

    def _interaction(self, interaction: dict[str, Any]) -> None:
        self.response_id = str(interaction.get("id") or self.response_id)
        self.status = str(interaction.get("status") or self.status)
        self.usage = interaction.get("usage") or self.usage
        self.model = str(interaction.get("model") or self.model)

    def _delta(self, index: int, delta: dict[str, Any]) -> list[Delta]:
        step = self._steps.setdefault(index, _Step({"type": "model_output"}))
        kind = delta.get("type")
        if kind == "text":
            text = str(delta.get("text") or "")
            step.text.append(text)
            return [("reasoning" if step.step.get("type") == "thought" else "text", text)] if text else []
        if kind == "thought_summary":
            content = delta.get("content") or {}
            text = str(content.get("text") or "") if content.get("type") == "text" else ""
            step.text.append(text)
            return [("reasoning", text)] if text else []
        if kind == "thought_signature":
            step.step["signature"] = str(step.step.get("signature") or "") + str(delta.get("signature") or "")
        elif kind == "arguments_delta":
            step.arguments.append(str(delta.get("arguments") or ""))
        return []

    def _blocks(self, *, only_done: bool) -> list[Block]:
        blocks = []
        for index in sorted(self._steps):
            step = self._steps[index]
            if only_done and not step.done:
                continue
            block = block_of_step(step.final())
            if block is not None and not (only_done and block.kind is BlockKind.TOOL_CALL):
                blocks.append(block)
        return blocks

    def forget_steps(self) -> None:
        """Drop the steps read so far (the whole interaction, read again, replaces them)."""
        self._steps.clear()

    def completed_blocks(self) -> list[Block]:
        return self._blocks(only_done=True)

    def result(self) -> StreamResult:
        if not self.finished:
            raise StreamError("the interaction's stream ended before interaction.completed", provider=PROVIDER)
        if self.status == "failed":
            raise ProviderError(f"interaction {self.response_id} failed", provider=PROVIDER)
        blocks = self._blocks(only_done=False)
        return StreamResult(blocks, interactions_usage(self.usage), self.stop_reason(blocks), self.response_id)

    def stop_reason(self, blocks: list[Block]) -> str:
        if any(b.kind is BlockKind.TOOL_CALL for b in blocks):
            return STOP_TOOL_CALLS
        if self.status == "incomplete":
            return STOP_MAX_TOKENS
        return STOP_END if self.status in ("completed", "requires_action", "") else STOP_OTHER


_STATUSES = {
    "INVALID_ARGUMENT": 400,
    "invalid_request": 400,
    "NOT_FOUND": 404,
    "not_found": 404,
    "RESOURCE_EXHAUSTED": 429,
    "rate_limit_exceeded": 429,
    "UNAVAILABLE": 503,
}


def _error(error: dict[str, Any]) -> ProviderError:
    """An ``error`` event as the exception an HTTP answer with that error would raise."""
    code = str(error.get("code") or "")
    status = int(code) if code.isdigit() else _STATUSES.get(code, 500)
    text = json.dumps({"error": {"message": str(error.get("message") or "the interaction failed"), "status": code}})
    return error_from_response(status, text, {}, provider=PROVIDER, parser=gemini_error_info)


def whole_events(interaction: dict[str, Any], inputs: int = 0) -> list[SSEEvent]:
    """The events a stream of the whole interaction ``interaction`` (a non-streamed create, or a get) would
    carry: created, each output step started and stopped, completed. A stored interaction read back with
    ``GET`` shows its ``inputs`` input steps before its output: they are left out."""

    def event(data: dict[str, Any]) -> SSEEvent:
        return SSEEvent("", json.dumps(data))

    head = {k: v for k, v in interaction.items() if k not in ("steps", "usage")}
    events = [event({"event_type": "interaction.created", "interaction": head})]
    for index, step in enumerate(interaction.get("steps") or ()):
        if index < inputs:
            continue
        events.append(event({"event_type": "step.start", "index": index, "step": step}))
        events.append(event({"event_type": "step.stop", "index": index}))
    events.append(event({"event_type": "interaction.completed", "interaction": interaction}))
    return events
