"""Event types for an inference's life. Events are plain data; sinks decide what to do with them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from ..turns import TURN_META_INFERENCE_ID, TURN_META_SESSION_ID, Turn

__all__ = [
    "STOP_CONTENT_FILTER",
    "STOP_END",
    "STOP_MAX_TOKENS",
    "STOP_OTHER",
    "STOP_PAUSE",
    "STOP_REFUSAL",
    "STOP_TOOL_CALLS",
    "Event",
    "EventApprovalRequested",
    "EventBuiltinTool",
    "EventCitations",
    "EventError",
    "EventFinal",
    "EventInterrupt",
    "EventLog",
    "EventMetadata",
    "EventReasoningDelta",
    "EventStart",
    "EventTextDelta",
    "EventToolCallRequested",
    "EventToolCallStarted",
    "EventToolResult",
    "Usage",
    "metadata_for",
]

# One stop-reason vocabulary across providers.
STOP_END = "end_turn"
STOP_MAX_TOKENS = "max_tokens"
STOP_TOOL_CALLS = "tool_calls"
STOP_CONTENT_FILTER = "content_filter"
STOP_REFUSAL = "refusal"
STOP_PAUSE = "pause_turn"
STOP_OTHER = "other"


@dataclass
class Usage:
    """Token counts of one provider call. ``input_tokens`` includes cached tokens."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        # every field is an int, so dataclasses.asdict's recursive copy would only cost time
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        return cls(**{k: int(v) for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class EventMetadata:
    """Who and what an event is about."""

    session_id: str = ""
    inference_id: str = ""
    turn_id: str = ""
    provider: str = ""
    model: str = ""
    usage: Usage | None = None
    cost: dict[str, float] | None = None
    """USD of the request (``geppetto.pricing.Cost.to_dict()``), on ``final``; None when unpriced."""
    stop_reason: str = ""
    duration_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def metadata_for(turn: Turn, provider: str = "", model: str = "") -> EventMetadata:
    """Event metadata carrying the turn's session, inference and turn ids."""
    return EventMetadata(
        session_id=TURN_META_SESSION_ID.get(turn.metadata) or "",
        inference_id=TURN_META_INFERENCE_ID.get(turn.metadata) or "",
        turn_id=turn.id,
        provider=provider,
        model=model,
    )


@dataclass
class Event:
    """Base of every event; ``type`` names it on the wire (JSON lines, routers)."""

    type: ClassVar[str] = "event"
    metadata: EventMetadata

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        meta = data.pop("metadata")
        return {"type": self.type, **data, "metadata": {k: v for k, v in meta.items() if v not in ("", None, {})}}


@dataclass
class EventStart(Event):
    type: ClassVar[str] = "start"


@dataclass
class EventTextDelta(Event):
    type: ClassVar[str] = "text_delta"
    delta: str = ""


@dataclass
class EventReasoningDelta(Event):
    type: ClassVar[str] = "reasoning_delta"
    delta: str = ""


@dataclass
class EventToolCallRequested(Event):
    type: ClassVar[str] = "tool_call"
    call_id: str = ""
    name: str = ""
    args: Any = None


@dataclass
class EventToolCallStarted(Event):
    type: ClassVar[str] = "tool_call_started"
    call_id: str = ""
    name: str = ""


@dataclass
class EventToolResult(Event):
    """A tool call's result, or its ``error``; ``denied`` when a person refused the call (the error is then
    the refusal the model reads: nothing ran and nothing failed), so every reader can tell the two apart."""

    type: ClassVar[str] = "tool_result"
    call_id: str = ""
    name: str = ""
    result: Any = None
    error: str | None = None
    denied: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        if not self.denied:  # said only when true, so the dict of every other result stays as it was
            del data["denied"]
        return data


@dataclass
class EventApprovalRequested(Event):
    """The tool loop stopped: ``calls`` wait for a person (``kind`` ``"approval"``) or the client
    (``"client"``), each a dict with ``call_id``, ``name``, ``arguments``, ``kind``, ``requested_at`` and
    ``expires_at``. Answer them with ``await session.resume({call_id: ...})``."""

    type: ClassVar[str] = "approval_requested"
    calls: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class EventBuiltinTool(Event):
    """A provider built-in tool (web search, code execution, MCP...) was called or answered on the server.

    Nothing runs on the client: the call and its result are already in the Turn as ``other`` blocks
    typed under ``payload["builtin"]`` (see :class:`geppetto.turns.BuiltinTool`, whose fields these are).
    """

    type: ClassVar[str] = "builtin_tool"
    call_id: str = ""
    tool: str = ""
    phase: str = "call"
    name: str = ""
    input: Any = None
    output: Any = None
    error: bool = False
    sources: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class EventCitations(Event):
    """What the text of one provider call cites, published when the call ends (after its text deltas).

    ``citations`` are normalized from every provider's form (Responses and Chat annotations, Claude
    citations, Gemini grounding and citation metadata) by :func:`geppetto.turns.citation_sources`: each a
    dict with ``url`` (a web page) or ``document`` (a provider's file id, a document's title or index),
    ``title``, and when the provider gives them ``cited_text`` (the quoted text) and ``start`` / ``end``
    (the span of the answer's text that cites it). The text blocks keep the provider's own form."""

    type: ClassVar[str] = "citations"
    citations: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class EventFinal(Event):
    """The inference finished; usage and stop reason are in the metadata."""

    type: ClassVar[str] = "final"
    text: str = ""


@dataclass
class EventError(Event):
    type: ClassVar[str] = "error"
    message: str = ""
    error_type: str = ""


@dataclass
class EventInterrupt(Event):
    type: ClassVar[str] = "interrupt"
    reason: str = ""


@dataclass
class EventLog(Event):
    type: ClassVar[str] = "log"
    level: str = "info"
    message: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
