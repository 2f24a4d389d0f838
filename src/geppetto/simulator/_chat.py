"""OpenAI Chat Completions: `POST /v1/chat/completions`, streamed or not, with tool-message pairing.

Reasoning is shown the way DeepSeek-style compatible servers show it, as `reasoning_content` on the message
(`delta.reasoning_content` chunks before the content and tool calls when streaming), for any model but
OpenAI's own (`gpt-`, `chatgpt`, `o1`/`o3`/`o4` names), which keep it hidden and only count it. DeepSeek's
thinking mode (a model name with `reason` or `deepseek-r1`, or `thinking: {"type": "enabled"}`) reasons on
every reply and requires `reasoning_content` back on the assistant messages of every exchange with tool calls.
"""

from __future__ import annotations

import copy
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp

from ._attachments import chat_files, check_chat_files, framed_file
from ._call import Call
from ._errors import SimError
from ._faults import SSEStream, sse
from ._model import REASONING_PREFIXES, Msg, Reply, ToolSpec, decide
from ._openai_items import arguments_json, tool_choice
from ._openai_out import chunks
from ._output_rules import check_openai_format
from ._prompt_cache import Segment, cache_use
from ._state import new_id
from ._tokens import count_items, count_text
from ._validate import validate

_ORPHAN_TOOL = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
)

_MISSING_REASONING = (
    "Missing `reasoning_content` field in the assistant message at message index {index}. For more information, "
    "please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls"
)
_OPENAI_MODELS = ("gpt-", "chatgpt", *REASONING_PREFIXES)
_THINKING_MODELS = ("reason", "deepseek-r1")
DEFAULT_REASONING = "Thinking about the request."


def thinking_mode(body: dict[str, Any]) -> bool:
    """DeepSeek's thinking mode: `thinking.type` says so, else a reasoner model name does."""
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "disabled"):
        return bool(thinking["type"] == "enabled")
    model = str(body.get("model") or "").lower()
    return any(marker in model for marker in _THINKING_MODELS)


def shown_reasoning(body: dict[str, Any], reply: Reply) -> str | None:
    """The `reasoning_content` to send: the reply's reasoning (or a default in thinking mode); never for OpenAI."""
    if str(body.get("model") or "").lower().startswith(_OPENAI_MODELS):
        return None
    if reply.reasoning is not None:
        return reply.reasoning
    return DEFAULT_REASONING if thinking_mode(body) else None


def check_reasoning_replayed(messages: list[Any]) -> None:
    """Thinking mode: every assistant message of an exchange (user message to user message) with tool calls
    carries `reasoning_content` (DeepSeek's 400 otherwise)."""
    exchange: list[int] = []
    for index, message in enumerate([*messages, {"role": "user"}]):
        if message.get("role") != "user":
            exchange.append(index)
            continue
        assistants = [i for i in exchange if messages[i].get("role") == "assistant"]
        if any(messages[i].get("tool_calls") for i in assistants):
            for i in assistants:
                if messages[i].get("reasoning_content") is None:
                    raise SimError(400, _MISSING_REASONING.format(index=i), code="invalid_request_error")
        exchange = []


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and not framed_file(p))
    return ""


def check_messages(messages: list[Any]) -> None:
    """Every assistant tool call answered by the tool messages right after it; no tool message without a call."""
    index = 0
    while index < len(messages):
        message = messages[index]
        if message.get("role") == "tool":
            raise SimError(400, _ORPHAN_TOOL, param=f"messages.[{index}].role")
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        index += 1
        if not calls:
            continue
        ids = [str(c.get("id")) for c in calls if isinstance(c, dict)]
        answered: set[str] = set()
        while index < len(messages) and messages[index].get("role") == "tool":
            call_id = str(messages[index].get("tool_call_id"))
            if call_id not in ids:
                raise SimError(400, _ORPHAN_TOOL, param=f"messages.[{index}].role")
            answered.add(call_id)
            index += 1
        missing = [i for i in ids if i not in answered]
        if missing:
            raise SimError(
                400,
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(missing)}",
                param=f"messages.[{min(index, len(messages) - 1)}].role",
            )


def to_msgs(messages: list[Any]) -> list[Msg]:
    """The neutral model view of Chat messages."""
    msgs: list[Msg] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            msgs.append(Msg("result", _text(message.get("content")), call_id=str(message.get("tool_call_id"))))
            continue
        text = _text(message.get("content"))
        if role == "assistant":
            if text:
                msgs.append(Msg("assistant", text))
            for c in message.get("tool_calls") or []:
                fn = c.get("function") or {}
                msgs.append(Msg("call", str(fn.get("arguments", "")), str(fn.get("name", "")), str(c.get("id"))))
        else:
            msgs.append(Msg("user" if role == "user" else "system", text))
            msgs.extend(chat_files(message.get("content")) if role == "user" else [])
    return msgs


def _tools(body: dict[str, Any]) -> list[ToolSpec]:
    specs = []
    for tool in body.get("tools") or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and fn.get("name"):
            raw_params = fn.get("parameters")
            params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
            specs.append(ToolSpec(str(fn["name"]), str(fn.get("description") or ""), params))
    return specs


def _schema(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        inner = fmt.get("json_schema") or {}
        check_openai_format(inner, "response_format.json_schema")
        return dict(inner.get("schema") or {"type": "object"})
    if isinstance(fmt, dict) and fmt.get("type") == "json_object":
        return {"type": "object", "properties": {"answer": {"type": "string"}}}
    return None


def _message(reply: Reply, reasoning: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text, "refusal": None, "annotations": []}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.call_id or new_id("call_"),
                "type": "function",
                "function": {"name": c.name, "arguments": arguments_json(c.args)},
            }
            for c in reply.tool_calls
        ]
    return message


def _usage(messages: list[Any], message: dict[str, Any], reply: Reply, cached: int = 0) -> dict[str, Any]:
    prompt = count_items(messages)
    text = message.get("reasoning_content", reply.reasoning)
    reasoning = count_text(text) if text else 0
    visible = {key: value for key, value in message.items() if key != "reasoning_content"}
    completion = count_items([visible]) + reasoning
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


SYSTEM_FINGERPRINT = "fp_5e10b7c2a1"
"""The backend configuration the simulator reports (a string, as the service sends; it never changes)."""


async def create_chat_completion(call: Call) -> ASGIApp:
    """POST /v1/chat/completions."""
    body = call.obj()
    validate("CreateChatCompletionRequest", body)
    messages = body["messages"]
    check_messages(messages)
    check_chat_files(messages, str(body.get("model") or ""))
    if thinking_mode(body):
        check_reasoning_replayed(messages)
    state = call.state
    reply = state.next_reply() or decide(
        to_msgs(messages), _tools(body), tool_choice(body.get("tool_choice")), _schema(body)
    )
    message = _message(reply, shown_reasoning(body, reply))
    finish = "tool_calls" if reply.tool_calls else "length" if reply.stop == "max_tokens" else "stop"
    completion_id = new_id("chatcmpl-")
    with state.lock:
        state.contexts[completion_id] = copy.deepcopy(messages)
    head = {
        "id": completion_id,
        "created": state.now(),
        "model": body.get("model"),
        "service_tier": "default",
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }
    # OpenAI's automatic prompt cache: a repeated prefix of 1,024 tokens or more is read from it
    route = f"chat|{body.get('model')}|{body.get('prompt_cache_key') or ''}"
    segments = [Segment(body.get("tools"), 0), *(Segment(m, count_items([m])) for m in messages)]
    usage = _usage(messages, message, reply, cache_use(state, route, segments, implicit=True).read)
    if not body.get("stream"):
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        return JSONResponse({**head, "object": "chat.completion", "choices": [choice], "usage": usage})
    options = body.get("stream_options") or {}
    return SSEStream(
        _frames(head, message, finish, usage if options.get("include_usage") else None),
        call.fault,
        lambda: state.closing,
        api="chat",
    )


def _frames(head: dict[str, Any], message: dict[str, Any], finish: str, usage: dict[str, Any] | None) -> list[bytes]:
    extra = {"usage": None} if usage is not None else {}

    def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        return sse(None, {**head, "object": "chat.completion.chunk", "choices": [choice], **extra})

    reasoning = message.get("reasoning_content")
    if reasoning is None:
        frames = [chunk({"role": "assistant", "content": "", "refusal": None})]
        frames += [chunk({"content": delta}) for delta in chunks(message["content"] or "")]
    else:  # DeepSeek's shape: reasoning deltas with content null, then content deltas with reasoning null
        frames = [chunk({"role": "assistant", "content": None, "reasoning_content": ""})]
        frames += [chunk({"content": None, "reasoning_content": delta}) for delta in chunks(reasoning)]
        frames += [chunk({"content": delta, "reasoning_content": None}) for delta in chunks(message["content"] or "")]
    for index, tool_call in enumerate(message.get("tool_calls", [])):
        fn = tool_call["function"]
        first = {
            "index": index,
            "id": tool_call["id"],
            "type": "function",
            "function": {"name": fn["name"], "arguments": ""},
        }
        frames.append(chunk({"tool_calls": [first]}))
        frames += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": d}}]}) for d in chunks(fn["arguments"])
        ]
    frames.append(chunk({}, finish))
    if usage is not None:
        frames.append(sse(None, {**head, "object": "chat.completion.chunk", "choices": [], "usage": usage}))
    frames.append(b"data: [DONE]\n\n")
    return frames
