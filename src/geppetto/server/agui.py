"""AG-UI: a run input in, the inference's geppetto events out as AG-UI events (the ``ag-ui-protocol``
package's types and encoder)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, ClassVar

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder

from .._exceptions import UsageError
from .._terms import for_http
from ..tools import ApprovalPendingError, PendingCall, ToolDefinition, ToolReportedError
from ..turns import Turn, new_id
from ._builtin import BuiltinCalls, sources
from ._messages import split_messages
from ._publish import EVENTS_MISSING, missing_payload
from ._runner import RUN_FINISHED, RUN_STARTED, Busy

__all__ = [
    "APPROVAL_SCHEMA",
    "AGUIStream",
    "client_tools",
    "parse_input",
    "prompt_and_seed",
    "resume_decisions",
    "wants_resume",
]

APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}
"""The answer a tool-approval interrupt expects in its resume entry's ``payload``."""


def parse_input(body: Any) -> RunAgentInput:
    """The run input (pydantic's ValidationError for a body that is not one)."""
    return RunAgentInput.model_validate(body)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal input: the text parts
        return "".join(getattr(part, "text", "") or "" for part in content)
    return ""


def prompt_and_seed(run: RunAgentInput) -> tuple[str, Turn | None]:
    """The prompt (the last user message) and, when the input carries earlier messages, a turn holding them
    (used only for a thread the store does not know yet)."""
    pairs = [("system" if m.role == "developer" else m.role, _text(m.content)) for m in run.messages]
    return split_messages(
        pairs,
        no_user="the run input has no user message; send the prompt as a message with role 'user'",
        empty="the last user message is empty; send some text",
    )


def client_tools(run: RunAgentInput) -> list[ToolDefinition]:
    """The tools the front-end runs itself (the run input's ``tools``); ValueError for a tool whose
    parameters are not a JSON object schema."""
    out = []
    for t in run.tools or []:
        params = t.parameters if t.parameters is not None else {"type": "object", "properties": {}}
        if not isinstance(params, dict) or params.get("type") != "object":
            raise ValueError(f"tool {t.name!r}: parameters must be a JSON object schema ({{'type': 'object', ...}})")
        out.append(ToolDefinition(name=t.name, description=t.description or "", parameters=params))
    return out


def wants_resume(run: RunAgentInput) -> bool:
    """Whether the run answers interrupts (``resume``) or client-side tool calls (tool messages at the end)."""
    return bool(run.resume) or bool(run.messages and run.messages[-1].role == "tool")


def _approval(entry: Any) -> bool | str:
    if entry.status == "cancelled":
        return "the user cancelled the approval"
    payload = entry.payload
    if payload is None or isinstance(payload, bool | str):
        return True if payload is None else payload
    if isinstance(payload, dict) and isinstance(payload.get("approved"), bool):
        if payload["approved"]:
            return True
        reason = payload.get("reason")
        return reason if isinstance(reason, str) and reason else False
    raise ValueError(
        f"the resume payload of interrupt {entry.interrupt_id} must be {{'approved': true|false, 'reason'?: '...'}}"
    )


def resume_decisions(run: RunAgentInput, waiting: Mapping[str, PendingCall]) -> dict[str, Any]:
    """The decisions a run carries for the calls that wait: its resume entries (an approval's payload
    ``{"approved": bool, "reason"?: str}``, a client-side call's payload its result) and the tool messages
    at the end of its messages that answer waiting client-side calls. ValueError for a bad payload."""
    decisions: dict[str, Any] = {}
    for entry in run.resume or []:
        call = waiting.get(entry.interrupt_id)
        if call is not None and call.kind == "client":
            cancelled = entry.status == "cancelled"
            decisions[entry.interrupt_id] = (
                ToolReportedError("the client cancelled this call") if cancelled else entry.payload
            )
        else:
            decisions[entry.interrupt_id] = _approval(entry)  # an id that does not wait is refused by the session
    for message in reversed(run.messages):
        if message.role != "tool":
            break
        call = waiting.get(message.tool_call_id)
        if call is not None and call.kind == "client" and message.tool_call_id not in decisions:
            error = getattr(message, "error", None)
            decisions[message.tool_call_id] = ToolReportedError(error) if error else message.content
    return decisions


class AGUIStream:
    """Turns the events of one inference (bus event dicts) into AG-UI events, in a valid order: text and
    reasoning messages opened before their content and closed before a tool call or the run's end.

    :meth:`started` gives ``RUN_STARTED`` before the inference has begun (the bus's ``run_started`` then
    adds nothing); :meth:`not_started` ends the run when it could not begin."""

    def __init__(
        self, thread_id: str, run_id: str, accept: str | None = None, *, answered: Collection[str] = ()
    ) -> None:
        self.thread_id, self.run_id = thread_id, run_id
        self.answered = set(answered)  # client-side calls this run answers: the client has their results
        self.interrupts: list[Interrupt] = []
        self.client_calls: list[str] = []
        self.encoder = EventEncoder(accept=accept or "text/event-stream")
        self._text: str | None = None
        self._last_text: str | None = None
        """The latest text message, which a model call's ``citations`` are about."""
        self._reasoning: str | None = None
        self._started = False
        self._builtin_calls = BuiltinCalls()

    @property
    def media_type(self) -> str:
        return self.encoder.get_content_type()

    def encode(self, events: list[BaseEvent]) -> str:
        """The events as the client asked for them, each stamped with the time it was sent (Unix ms)."""
        now = int(time.time() * 1000)
        for event in events:
            if event.timestamp is None:
                event.timestamp = now
        return "".join(self.encoder.encode(e) for e in events)

    def started(self) -> list[BaseEvent]:
        """``RUN_STARTED``, once."""
        if self._started:
            return []
        self._started = True
        return [RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)]

    def not_started(self, exc: Exception) -> list[BaseEvent]:
        """``RUN_ERROR`` for an inference that could not begin, its code the kind the REST API's error
        would have: ``session_busy`` (the thread runs another inference), ``conflict`` or ``unavailable``."""
        if isinstance(exc, Busy):
            code = "session_busy"
        elif isinstance(exc, ApprovalPendingError):
            code = "approval_pending"
        elif isinstance(exc, UsageError):
            code = "conflict"
        else:
            code = "unavailable"
        return [
            *self.started(),
            RunErrorEvent(message=for_http(str(exc), self.thread_id) or type(exc).__name__, code=code),
        ]

    def _close(self) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if self._reasoning is not None:
            out += [ReasoningMessageEndEvent(message_id=self._reasoning), ReasoningEndEvent(message_id=self._reasoning)]
            self._reasoning = None
        if self._text is not None:
            out.append(TextMessageEndEvent(message_id=self._text))
            self._text = None
        return out

    def feed(self, event: dict[str, Any]) -> list[BaseEvent]:
        """The AG-UI events for one bus event (empty for what AG-UI has no event for)."""
        kind = event.get("type")
        if kind == RUN_STARTED:
            return self.started()
        if kind == "final":
            return [*self._answer_open(), *self._close()]
        if kind == EVENTS_MISSING:  # events the bus lost: say so where they would have been
            return [CustomEvent(name=EVENTS_MISSING, value=missing_payload(event))]
        handler = self._handlers.get(str(kind))
        return handler(self, event) if handler is not None else []

    def _text_delta(self, event: dict[str, Any]) -> list[BaseEvent]:
        if not event.get("delta"):
            return []
        out = self._close() if self._reasoning is not None else []
        if self._text is None:
            self._text = self._last_text = new_id()
            out.append(TextMessageStartEvent(message_id=self._text, role="assistant"))
        return [*out, TextMessageContentEvent(message_id=self._text, delta=str(event["delta"]))]

    def _reasoning_delta(self, event: dict[str, Any]) -> list[BaseEvent]:
        if not event.get("delta"):
            return []
        out = self._close() if self._text is not None else []
        if self._reasoning is None:
            self._reasoning = new_id()
            out += [
                ReasoningStartEvent(message_id=self._reasoning),
                ReasoningMessageStartEvent(message_id=self._reasoning, role="reasoning"),
            ]
        return [*out, ReasoningMessageContentEvent(message_id=self._reasoning, delta=str(event["delta"]))]

    def _call(self, call_id: str, name: str, args: Any, metadata: dict[str, Any] | None = None) -> list[BaseEvent]:
        return [
            *self._close(),
            ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, metadata=metadata),
            ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps(args if args is not None else {}, default=str)),
            ToolCallEndEvent(tool_call_id=call_id),
        ]

    def _tool_call(self, event: dict[str, Any]) -> list[BaseEvent]:
        return self._call(str(event.get("call_id") or new_id()), str(event.get("name") or ""), event.get("args"))

    def _approval(self, event: dict[str, Any]) -> list[BaseEvent]:
        for call in event.get("calls") or []:
            if call.get("kind") == "client":
                self.client_calls.append(str(call["call_id"]))
                continue
            expires = call.get("expires_at")
            self.interrupts.append(
                Interrupt(
                    id=str(call["call_id"]),
                    reason="tool_approval",
                    message=f"Run {call.get('name')} with {json.dumps(call.get('arguments'), default=str)}?",
                    tool_call_id=str(call["call_id"]),
                    response_schema=APPROVAL_SCHEMA,
                    expires_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)) if expires else None,
                )
            )
        return []

    def _tool_result(self, event: dict[str, Any]) -> list[BaseEvent]:
        if event.get("call_id") in self.answered:
            return []  # the client ran it and holds its result
        result = event.get("result")
        content = event.get("error") or (result if isinstance(result, str) else json.dumps(result, default=str))
        call_id = str(event.get("call_id") or "")
        return [
            *self._close(),
            ToolCallResultEvent(message_id=new_id(), tool_call_id=call_id, content=content, role="tool"),
        ]

    def _builtin(self, event: dict[str, Any]) -> list[BaseEvent]:
        """A call the provider ran itself, as a tool call (its metadata says so) and its result; a result's
        sources (``{"url", "title"}`` each) are also under the result's ``metadata["sources"]`` (the
        validator takes only text as a result's content, so no content parts)."""
        tool = str(event.get("tool") or event.get("name") or "builtin")
        metadata: dict[str, Any] = {"provider_executed": True, "builtin_tool": tool}
        if event.get("phase") == "call":
            return self._call(self._builtin_calls.call(event), tool, event.get("input"), metadata)
        call_id, known = self._builtin_calls.result(event)
        out = [] if known else self._call(call_id, tool, None, metadata)
        if found := sources(event):
            metadata["sources"] = found
        return [
            *out,
            *self._close(),
            ToolCallResultEvent(
                message_id=new_id(),
                tool_call_id=call_id,
                content=_builtin_content(event),
                role="tool",
                metadata=metadata,
            ),
        ]

    def _citations(self, event: dict[str, Any]) -> list[BaseEvent]:
        """What the answer's text cites (normalized, see :func:`geppetto.turns.citation_sources`): under
        ``metadata["citations"]`` of the text's ``TEXT_MESSAGE_END`` (the model call's text is still open
        when its citations come), else, the text being closed, a ``CUSTOM`` event ``citations`` naming it."""
        found = [c for c in event.get("citations") or [] if isinstance(c, dict)]
        if not found:
            return []
        if self._text is not None:
            out = self._close()  # the reasoning ends first, so the text's end is last
            out[-1].metadata = {"citations": found}
            return out
        return [CustomEvent(name="citations", value={"messageId": self._last_text, "citations": found})]

    def _answer_open(self) -> list[BaseEvent]:
        """Built-in calls the provider answered without a separate result (the call item holds it all)."""
        return [
            ToolCallResultEvent(
                message_id=new_id(), tool_call_id=i, content="", role="tool", metadata={"provider_executed": True}
            )
            for i in self._builtin_calls.unanswered()
        ]

    def _finished(self, event: dict[str, Any]) -> list[BaseEvent]:
        out = self._close()
        if event.get("status") == "completed":
            outcome: RunFinishedInterruptOutcome | RunFinishedSuccessOutcome | None = None
            if self.interrupts:  # the run waits for a person: resume with entries answering these
                outcome = RunFinishedInterruptOutcome(interrupts=self.interrupts)
            elif self.client_calls:  # the client runs these and sends their results as tool messages
                outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=self.client_calls)
            return [*out, RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome)]
        code = "cancelled" if event.get("status") == "cancelled" else "inference_failed"
        return [*out, RunErrorEvent(message=str(event.get("error") or "the inference failed"), code=code)]

    _handlers: ClassVar[dict[str, Callable[[AGUIStream, dict[str, Any]], list[BaseEvent]]]] = {
        "text_delta": _text_delta,
        "reasoning_delta": _reasoning_delta,
        "tool_call": _tool_call,
        "approval_requested": _approval,
        "tool_result": _tool_result,
        "builtin_tool": _builtin,
        "citations": _citations,
        RUN_FINISHED: _finished,
    }


def _builtin_content(event: dict[str, Any]) -> str:
    """A built-in result as a tool message's text: its output, else the sources it found as JSON."""
    output, found = event.get("output"), sources(event)
    if event.get("error"):
        return f"error: {output if output is not None else 'the provider tool failed'}"
    if output is None:
        return json.dumps(found) if found else ""
    return output if isinstance(output, str) else json.dumps(output, default=str)
