"""The Vercel AI SDK UI message stream (what ``useChat`` reads): the request ``useChat`` sends in, the
inference's geppetto events out as UI message chunks, as Server-Sent Events with the stream's header."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from ..tools import PendingCall, ToolReportedError
from ..turns import Turn, new_id
from ._messages import split_messages
from ._publish import EVENTS_MISSING, missing_payload
from ._runner import RUN_FINISHED, RUN_STARTED

__all__ = ["HEADERS", "VercelStream", "prompt_and_seed", "resume_decisions", "resumed_message"]

HEADERS = {"x-vercel-ai-ui-message-stream": "v1", "cache-control": "no-cache", "x-accel-buffering": "no"}


def _text(message: dict[str, Any]) -> str:
    parts = message.get("parts")
    if isinstance(parts, list):
        return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text")
    content = message.get("content")  # the older message shape
    return content if isinstance(content, str) else ""


def prompt_and_seed(body: Any) -> tuple[str, str, Turn | None]:
    """The chat id, the prompt (the last user message's text parts) and the earlier messages as a turn
    (used only for a chat the store does not know yet). ValueError naming what is wrong."""
    if not isinstance(body, dict):
        raise ValueError('the body must be a JSON object as useChat sends it: {"id": ..., "messages": [...]}')
    chat_id, messages = body.get("id"), body.get("messages")
    if not isinstance(chat_id, str) or not chat_id:
        raise ValueError("'id' (the chat id) must be a non-empty string")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ValueError("'messages' must be a list of UI messages ({id, role, parts})")
    prompt, seed = split_messages(
        [(str(m.get("role")), _text(m)) for m in messages],
        no_user="'messages' has no user message; send the prompt as a message with role 'user'",
        empty="the last user message has no text part; send some text",
    )
    return chat_id, prompt, seed


def resumed_message(body: Any) -> dict[str, Any] | None:
    """The assistant message a request continues (its last message, when that is the assistant's: the
    client answered tool approvals or ran client-side tools in it), else None."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        last = messages[-1]
        if last.get("role") == "assistant" and isinstance(last.get("parts"), list):
            return last
    return None


def resume_decisions(message: dict[str, Any], waiting: Mapping[str, PendingCall]) -> dict[str, Any]:
    """The decisions the tool parts of ``message`` carry for the calls that wait: an ``approval-responded``
    part approves or denies (with its reason), ``output-available`` / ``output-error`` is a client-side
    tool's result or error, ``output-denied`` denies."""
    decisions: dict[str, Any] = {}
    for part in message["parts"]:
        if not isinstance(part, dict) or not str(part.get("type", "")).startswith(("tool-", "dynamic-tool")):
            continue
        call = waiting.get(str(part.get("toolCallId", "")))
        if call is None:
            continue
        state, approval = part.get("state"), part.get("approval") or {}
        reason = approval.get("reason") if isinstance(approval, dict) else None
        if state == "approval-responded" and isinstance(approval, dict):
            decisions[call.call_id] = True if approval.get("approved") is True else (reason or False)
        elif state == "output-denied":
            decisions[call.call_id] = reason or False
        elif state == "output-available" and call.kind == "client":
            decisions[call.call_id] = part.get("output")
        elif state == "output-error" and call.kind == "client":
            decisions[call.call_id] = ToolReportedError(str(part.get("errorText") or "the client's tool failed"))
    return decisions


def _value(result: Any) -> Any:
    """A tool result as a value: tools' results reach the model as text, JSON text is decoded back."""
    if isinstance(result, str):
        try:
            return json.loads(result)
        except ValueError:
            return result
    return result


def sse(chunk: dict[str, Any]) -> str:
    return f"data: {json.dumps(chunk, ensure_ascii=False, separators=(',', ':'))}\n\n"


DONE = "data: [DONE]\n\n"


class VercelStream:
    """Turns the events of one inference (bus event dicts) into UI message chunks: ``start``, a step per
    provider call, text and reasoning parts opened before their deltas and closed before a tool call, tool
    input and output, ``finish`` (or ``error``).

    As the ``ai`` package's ``streamText`` does, a step that called tools ends only once their outputs
    are in (``start-step``, ``tool-input-available``, ``tool-output-available``, ``finish-step``): the
    provider call's ``final`` waits for the results of the calls it made, and a new step, or the end of
    the run, ends it in any case."""

    def __init__(
        self, message_id: str | None = None, *, answered: Collection[str] = (), denied: Collection[str] = ()
    ) -> None:
        self.message_id = message_id or new_id()
        self.answered = set(answered)  # client-side calls this request answers: the client has their results
        self.denied = set(denied)  # calls the person denied in this request
        self._text: str | None = None
        self._reasoning: str | None = None
        self._step = False
        self._pending: set[str] = set()
        """Tool calls of the open step whose outputs have not arrived."""
        self._ending = False
        """The step's provider call finished; the step ends once ``_pending`` is empty."""

    def _close(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self._reasoning is not None:
            out.append({"type": "reasoning-end", "id": self._reasoning})
            self._reasoning = None
        if self._text is not None:
            out.append({"type": "text-end", "id": self._text})
            self._text = None
        return out

    def _open_step(self) -> list[dict[str, Any]]:
        if self._step and not self._ending:
            return []
        out = self._end_step()  # a step still waiting for tool outputs ends where the next begins
        self._step = True
        return [*out, {"type": "start-step"}]

    def _end_step(self) -> list[dict[str, Any]]:
        out = self._close()
        if self._step:
            self._step = False
            out.append({"type": "finish-step"})
        self._pending.clear()
        self._ending = False
        return out

    def _output(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        self._pending.discard(str(chunk["toolCallId"]))
        if self._ending and not self._pending:
            return [chunk, *self._end_step()]
        return [chunk]

    def feed(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type")
        if kind == RUN_STARTED:
            return [{"type": "start", "messageId": self.message_id}]
        if kind == "start":
            return self._open_step()
        if kind == "text_delta" and event.get("delta"):
            out = self._open_step()
            if self._reasoning is not None:
                out += self._close()
            if self._text is None:
                self._text = new_id()
                out.append({"type": "text-start", "id": self._text})
            return [*out, {"type": "text-delta", "id": self._text, "delta": str(event["delta"])}]
        if kind == "reasoning_delta" and event.get("delta"):
            out = self._open_step()
            if self._text is not None:
                out += self._close()
            if self._reasoning is None:
                self._reasoning = new_id()
                out.append({"type": "reasoning-start", "id": self._reasoning})
            return [*out, {"type": "reasoning-delta", "id": self._reasoning, "delta": str(event["delta"])}]
        if kind == "tool_call":
            args = event.get("args")
            self._pending.add(str(event.get("call_id") or ""))
            return [
                *self._open_step(),
                *self._close(),
                {
                    "type": "tool-input-available",
                    "toolCallId": str(event.get("call_id") or ""),
                    "toolName": str(event.get("name") or ""),
                    "input": args if args is not None else {},
                },
            ]
        if kind == "approval_requested":
            return [
                {"type": "tool-approval-request", "approvalId": str(c["call_id"]), "toolCallId": str(c["call_id"])}
                for c in event.get("calls") or []
                if c.get("kind") != "client"  # a client-side call waits as an input-available tool part
            ]
        if kind == "tool_result":
            call_id = str(event.get("call_id") or "")
            if call_id in self.answered:
                return []
            if call_id in self.denied:
                return [{"type": "tool-output-denied", "toolCallId": call_id}]
            if event.get("error"):
                return self._output(
                    {"type": "tool-output-error", "toolCallId": call_id, "errorText": str(event["error"])}
                )
            return self._output(
                {"type": "tool-output-available", "toolCallId": call_id, "output": _value(event.get("result"))}
            )
        if kind == "final":
            if self._pending:  # its tool calls' outputs belong to this step
                self._ending = True
                return self._close()
            return self._end_step()
        if kind == EVENTS_MISSING:  # events the bus lost: a data part where they would have been
            return [{"type": "data-events-missing", "data": missing_payload(event)}]
        if kind == RUN_FINISHED:
            out = self._end_step()
            if event.get("status") == "completed":
                return [*out, {"type": "finish"}]
            return [*out, {"type": "error", "errorText": str(event.get("error") or "the inference failed")}]
        return []
