"""AG-UI: a run input in, the inference's geppetto events out as AG-UI events (the ``ag-ui-protocol``
package's types and encoder)."""

from __future__ import annotations

import json
import time
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
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

from ..turns import Turn, new_id
from ._messages import split_messages
from ._publish import EVENTS_MISSING, missing_payload
from ._runner import RUN_FINISHED, RUN_STARTED

__all__ = ["AGUIStream", "parse_input", "prompt_and_seed"]


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


class AGUIStream:
    """Turns the events of one inference (bus event dicts) into AG-UI events, in a valid order: text and
    reasoning messages opened before their content and closed before a tool call or the run's end."""

    def __init__(self, thread_id: str, run_id: str, accept: str | None = None) -> None:
        self.thread_id, self.run_id = thread_id, run_id
        self.encoder = EventEncoder(accept=accept or "text/event-stream")
        self._text: str | None = None
        self._reasoning: str | None = None

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
            return [RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)]
        if kind == "text_delta" and event.get("delta"):
            out = []
            if self._reasoning is not None:
                out = self._close()
            if self._text is None:
                self._text = new_id()
                out.append(TextMessageStartEvent(message_id=self._text, role="assistant"))
            return [*out, TextMessageContentEvent(message_id=self._text, delta=str(event["delta"]))]
        if kind == "reasoning_delta" and event.get("delta"):
            out = []
            if self._text is not None:
                out = self._close()
            if self._reasoning is None:
                self._reasoning = new_id()
                out += [
                    ReasoningStartEvent(message_id=self._reasoning),
                    ReasoningMessageStartEvent(message_id=self._reasoning, role="reasoning"),
                ]
            return [*out, ReasoningMessageContentEvent(message_id=self._reasoning, delta=str(event["delta"]))]
        if kind == "tool_call":
            call_id = str(event.get("call_id") or new_id())
            args = event.get("args")
            out = self._close()
            out.append(ToolCallStartEvent(tool_call_id=call_id, tool_call_name=str(event.get("name") or "")))
            out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps(args if args is not None else {})))
            out.append(ToolCallEndEvent(tool_call_id=call_id))
            return out
        if kind == "tool_result":
            result = event.get("result")
            content = event.get("error") or (result if isinstance(result, str) else json.dumps(result, default=str))
            return [
                *self._close(),
                ToolCallResultEvent(
                    message_id=new_id(), tool_call_id=str(event.get("call_id") or ""), content=content, role="tool"
                ),
            ]
        if kind == "final":
            return self._close()
        if kind == EVENTS_MISSING:  # events the bus lost: say so where they would have been
            return [CustomEvent(name=EVENTS_MISSING, value=missing_payload(event))]
        if kind == RUN_FINISHED:
            out = self._close()
            if event.get("status") == "completed":
                return [*out, RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id)]
            code = "cancelled" if event.get("status") == "cancelled" else "inference_failed"
            return [*out, RunErrorEvent(message=str(event.get("error") or "the inference failed"), code=code)]
        return []
