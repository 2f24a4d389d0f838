"""The Vercel AI SDK UI message stream (what ``useChat`` reads): the request ``useChat`` sends in, the
inference's geppetto events out as UI message chunks, as Server-Sent Events with the stream's header."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from typing import Any, ClassVar

from ..tools import PendingCall, ToolReportedError
from ..turns import Turn, new_id, parse_data_url, source_key
from ._builtin import BuiltinCalls, as_citations, sources
from ._messages import split_messages
from ._publish import EVENTS_MISSING, missing_payload
from ._runner import RUN_FINISHED, RUN_STARTED

__all__ = ["HEADERS", "VercelStream", "prompt_and_seed", "prompt_files", "resume_decisions", "resumed_message"]

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


def prompt_files(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The last user message's ``file`` parts (``mediaType``, ``url``: a ``data:`` URL or an http(s) one,
    ``filename``) as attachments, None when it has none; call :func:`prompt_and_seed` first."""
    users = [m for m in body["messages"] if m.get("role") == "user"]
    parts = users[-1].get("parts") if users else None
    files = [p for p in parts if isinstance(p, dict) and p.get("type") == "file"] if isinstance(parts, list) else []
    out = []
    for part in files:
        url = str(part.get("url") or "")
        media_type = part.get("mediaType")
        source: dict[str, Any] = {"url": url}
        if url[:5].lower() == "data:":  # kept inline as bytes
            parsed = parse_data_url(url, where=f"the file {part.get('filename') or 'of the prompt'}")
            source, media_type = {"data": parsed.base64}, media_type or parsed.media_type
        item = {"media_type": media_type, **source, "filename": part.get("filename")}
        out.append({k: v for k, v in item.items() if v})
    return out or None


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
    input and output, ``finish`` (or ``error``). A built-in tool the provider ran (web search, code
    execution...) is a tool part marked ``providerExecuted``, and the sources its result found are
    ``source-url`` / ``source-document`` parts, as are the sources the answer's text cites (``citations``
    events), each source once per message.

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
        self._builtin_calls = BuiltinCalls()
        self._sourced: set[str] = set()

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
        """The UI message chunks for one bus event (empty for what the stream has no chunk for)."""
        kind = event.get("type")
        if kind == RUN_STARTED:
            return [{"type": "start", "messageId": self.message_id}]
        if kind == "start":
            return self._open_step()
        handler = self._handlers.get(str(kind))
        return handler(self, event) if handler is not None else []

    def _delta(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        if not event.get("delta"):
            return []
        reasoning = event["type"] == "reasoning_delta"
        out = self._open_step()
        if (self._text if reasoning else self._reasoning) is not None:
            out += self._close()
        part = "reasoning" if reasoning else "text"
        part_id = self._reasoning if reasoning else self._text
        if part_id is None:
            part_id = new_id()
            if reasoning:
                self._reasoning = part_id
            else:
                self._text = part_id
            out.append({"type": f"{part}-start", "id": part_id})
        return [*out, {"type": f"{part}-delta", "id": part_id, "delta": str(event["delta"])}]

    def _tool_call(self, event: dict[str, Any]) -> list[dict[str, Any]]:
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

    def _approval(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"type": "tool-approval-request", "approvalId": str(c["call_id"]), "toolCallId": str(c["call_id"])}
            for c in event.get("calls") or []
            if c.get("kind") != "client"  # a client-side call waits as an input-available tool part
        ]

    def _tool_result(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        call_id = str(event.get("call_id") or "")
        if call_id in self.answered:
            return []
        if call_id in self.denied:
            return [{"type": "tool-output-denied", "toolCallId": call_id}]
        if event.get("error"):
            return self._output({"type": "tool-output-error", "toolCallId": call_id, "errorText": str(event["error"])})
        return self._output(
            {"type": "tool-output-available", "toolCallId": call_id, "output": _value(event.get("result"))}
        )

    def _builtin(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        """A call the provider ran itself: a tool part marked ``providerExecuted``, and its result's sources
        as ``source-url`` (a web page) or ``source-document`` (a provider's file) parts."""
        out = [*self._open_step(), *self._close()]
        if event.get("phase") == "call":
            return [*out, _builtin_input(self._builtin_calls.call(event), event)]
        call_id, known = self._builtin_calls.result(event)
        if not known:
            out.append(_builtin_input(call_id, event))
        if event.get("error"):
            error = event.get("output") or "the provider's tool failed"
            out.append({"type": "tool-output-error", "toolCallId": call_id, "errorText": str(error), **_PROVIDER})
        else:
            found = sources(event)
            output = event.get("output") if event.get("output") is not None else found or None
            out.append({"type": "tool-output-available", "toolCallId": call_id, "output": output, **_PROVIDER})
        return [*out, *self._sources(call_id, as_citations(sources(event)))]

    def _sources(self, prefix: str, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``source-url`` / ``source-document`` parts for normalized citations (see
        :func:`geppetto.turns.citation_sources`), each source once per message."""
        out: list[dict[str, Any]] = []
        for n, source in enumerate(found):
            key, title = source_key(source), source.get("title")
            if not key or key in self._sourced:
                continue  # each source once per message
            self._sourced.add(key)
            part: dict[str, Any] = {"sourceId": f"{prefix}-{n}"}
            if source.get("url"):
                part.update({"type": "source-url", "url": key, **({"title": str(title)} if title else {})})
            else:  # a provider's file, a document: the ai package requires its title and media type
                part.update(
                    {"type": "source-document", "mediaType": "application/octet-stream", "title": str(title or key)}
                )
            out.append(part)
        return out

    def _citations(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        """What the answer's text cites, as source parts (the text part stays open)."""
        found = [c for c in event.get("citations") or [] if isinstance(c, dict)]
        return self._sources(f"cite-{new_id()}", found)

    def _final(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        # built-in calls the provider answered without a separate result (the call item holds it all)
        out = [
            {"type": "tool-output-available", "toolCallId": i, "output": None, **_PROVIDER}
            for i in self._builtin_calls.unanswered()
        ]
        if self._pending:  # its tool calls' outputs belong to this step
            self._ending = True
            return [*out, *self._close()]
        return [*out, *self._end_step()]

    def _missing(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        # events the bus lost: a data part where they would have been
        return [{"type": "data-events-missing", "data": missing_payload(event)}]

    def _finished(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        out = self._end_step()
        if event.get("status") == "completed":
            return [*out, {"type": "finish"}]
        return [*out, {"type": "error", "errorText": str(event.get("error") or "the inference failed")}]

    _handlers: ClassVar[dict[str, Callable[[VercelStream, dict[str, Any]], list[dict[str, Any]]]]] = {
        "text_delta": _delta,
        "reasoning_delta": _delta,
        "tool_call": _tool_call,
        "approval_requested": _approval,
        "tool_result": _tool_result,
        "builtin_tool": _builtin,
        "citations": _citations,
        "final": _final,
        EVENTS_MISSING: _missing,
        RUN_FINISHED: _finished,
    }


_PROVIDER = {"providerExecuted": True}


def _builtin_input(call_id: str, event: dict[str, Any]) -> dict[str, Any]:
    tool = str(event.get("tool") or event.get("name") or "builtin")
    given = event.get("input")
    return {
        "type": "tool-input-available",
        "toolCallId": call_id,
        "toolName": tool,
        "input": given if given is not None else {},
        **_PROVIDER,
    }
