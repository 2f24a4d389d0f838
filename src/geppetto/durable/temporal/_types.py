"""What geppetto's session workflow and its activities pass each other (all of it lands in workflow history)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...turns import Block, Turn

__all__ = [
    "Answer",
    "CallInfo",
    "PromptInput",
    "RequestInput",
    "RequestOutput",
    "ResumeInput",
    "SessionStart",
    "ToolInput",
    "ToolOutput",
    "TurnDelta",
]


@dataclass
class SessionStart:
    """The workflow's argument: the session and how its requests are made (``latest``: the Turn a
    continued-as-new run starts from)."""

    session_id: str
    engine: str
    middlewares: list[str] = field(default_factory=list)
    system: str | None = None
    request_timeout_s: float = 600.0
    tool_timeout_s: float = 600.0
    heartbeat_s: float = 20.0
    max_attempts: int = 10
    latest: Turn | None = None


@dataclass
class PromptInput:
    """A prompt: its text, its attachments (read by the client, inline), its structured-output config (the
    Turn data entry ``run(..., output=...)`` sets, as JSON)."""

    text: str
    files: list[dict[str, Any]] = field(default_factory=list)
    output: dict[str, Any] | None = None
    context: dict[str, str] = field(default_factory=dict)


@dataclass
class ResumeInput:
    """Decisions for calls waiting for approval (call id -> True, False or a reason), and the context the
    worker's event relay reads (``worker(events=...)``)."""

    decisions: dict[str, Any] = field(default_factory=dict)
    context: dict[str, str] = field(default_factory=dict)


@dataclass
class Answer:
    """A tool call's answer, handed to the next provider request."""

    call_id: str
    result: str | None = None
    error: str | None = None


@dataclass
class CallInfo:
    """A tool call the model made and nothing has answered yet."""

    call_id: str
    name: str
    arguments: Any = None
    needs_approval: bool = False


@dataclass
class RequestInput:
    """One provider request (with the session's middleware around it): a prompt, or the answers of the
    previous request's tool calls, continuing ``turn``."""

    session: SessionStart
    inference_id: str
    turn: Turn | None = None
    prompt: PromptInput | None = None
    answers: list[Answer] = field(default_factory=list)
    context: dict[str, str] = field(default_factory=dict)


@dataclass
class TurnDelta:
    """A Turn as what changed from the one a request activity was given: that Turn's first ``keep`` blocks
    as they were, then ``blocks``; the Turn's id, metadata and data whole."""

    keep: int
    blocks: list[Block]
    id: str
    metadata: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class RequestOutput:
    """The Turn after the request, as a delta from the Turn the activity was given, and its tool calls still
    to answer."""

    delta: TurnDelta
    calls: list[CallInfo] = field(default_factory=list)


@dataclass
class ToolInput:
    """One tool call to run."""

    session_id: str
    call: Block
    heartbeat_s: float = 20.0


@dataclass
class ToolOutput:
    """What the tool returned (or the error the model reads)."""

    result: str | None = None
    error: str | None = None
