"""Anthropic Messages API: `POST /v1/messages`, streamed or not, with tool and thinking rules."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp

from ._anthropic_binding import bind_content, check_binding, take_binding
from ._anthropic_diagnostics import diagnose, remember
from ._anthropic_rules import check_request
from ._attachments import check_claude_files, claude_files
from ._builtin import anthropic_blocks, anthropic_citations, anthropic_server_usage, decide_builtin, offered
from ._call import Call
from ._faults import SSEStream, sse
from ._model import Msg, Reply, ToolSpec, decide, is_reasoning_model
from ._openai_out import chunks
from ._output_rules import check_anthropic_format
from ._prompt_cache import Segment, cache_use
from ._state import SimState, new_id
from ._tokens import ITEM_OVERHEAD, count_items, count_text, count_value

DEFAULT_THINKING = "Let me work through the request."


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def to_msgs(body: dict[str, Any]) -> list[Msg]:
    """The neutral model view of an Anthropic request."""
    system = _text(body.get("system"))
    msgs = [Msg("system", system)] if system else []
    for message in body["messages"]:
        content = message.get("content")
        role = message.get("role")
        speaker = role if role in ("assistant", "system") else "user"
        if isinstance(content, str):
            msgs.append(Msg(speaker, content))
            continue
        for block in content:
            kind = block.get("type")
            if kind == "text":
                msgs.append(Msg(speaker, str(block.get("text", ""))))
            elif kind in ("document", "image") and role == "user":
                msgs.extend(claude_files([block]))
            elif kind == "tool_use":
                msgs.append(Msg("call", json.dumps(block.get("input")), str(block.get("name")), str(block.get("id"))))
            elif kind == "tool_result":
                inner = block.get("content")
                msgs.append(
                    Msg(
                        "result",
                        inner if isinstance(inner, str) else _text(inner),
                        call_id=str(block.get("tool_use_id")),
                    )
                )
    return msgs


def _tools(body: dict[str, Any]) -> list[ToolSpec]:
    specs = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("name") and isinstance(tool.get("input_schema"), dict):
            specs.append(ToolSpec(str(tool["name"]), str(tool.get("description") or ""), dict(tool["input_schema"])))
    return specs


def _choice(body: dict[str, Any]) -> str:
    choice = body.get("tool_choice")
    if not isinstance(choice, dict):
        return "auto"
    kind = choice.get("type")
    return {"any": "required", "none": "none"}.get(str(kind), str(choice.get("name")) if kind == "tool" else "auto")


def thinking_enabled(body: dict[str, Any]) -> bool:
    """True when the request turns extended thinking on."""
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _content(state: SimState, body: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if thinking_enabled(body) or reply.reasoning is not None or is_reasoning_model(str(body.get("model"))):
        text = reply.reasoning or DEFAULT_THINKING
        blocks.append({"type": "thinking", "thinking": text, "signature": state.seal("anthropic", "thinking", text)})
    blocks += anthropic_blocks(reply.builtin, new_id)
    if reply.text is not None:
        citations = anthropic_citations(reply.builtin)
        blocks.append({"type": "text", "text": reply.text, **({"citations": citations} if citations else {})})
    for call in reply.tool_calls:
        args = call.args if isinstance(call.args, dict) else {"input": call.args}
        blocks.append({"type": "tool_use", "id": call.call_id or new_id("toolu_"), "name": call.name, "input": args})
    return blocks


def _input_tokens(body: dict[str, Any]) -> int:
    system = body.get("system")
    return count_items(body["messages"]) + (ITEM_OVERHEAD + count_value(system) if system else 0)


def _marked(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(b, dict) and "cache_control" in b for b in value)


def _segments(body: dict[str, Any]) -> list[Segment]:
    """The request as cache segments: tools, the system prompt, then each block of each message."""
    tools, system = body.get("tools") or [], body.get("system")
    segments = [Segment(tools, 0, _marked(tools))]
    if system:
        segments.append(Segment(system, ITEM_OVERHEAD + count_value(system), _marked(system)))
    for message in body["messages"]:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        for i, block in enumerate(blocks):
            overhead = ITEM_OVERHEAD if i == 0 else 0
            marked = isinstance(block, dict) and "cache_control" in block
            segments.append(Segment([message.get("role"), block], overhead + count_value(block), marked))
    return segments


async def count_tokens(call: Call) -> ASGIApp:
    """POST /v1/messages/count_tokens: the request's input tokens, after the same checks as a message
    (without `max_tokens`, which counting does not take)."""
    body = call.obj()
    check_request(call.state, {"max_tokens": 1, **{k: v for k, v in body.items() if k != "max_tokens"}})
    return JSONResponse({"input_tokens": _input_tokens(body)})


async def create_message(call: Call) -> ASGIApp:
    """POST /v1/messages."""
    body = call.obj()
    state = call.state
    betas = call.request.headers.get("anthropic-beta", "")
    behavior = take_binding(body, betas)
    check_request(state, body)
    check_claude_files(body["messages"], betas)
    sent = copy.deepcopy(body)  # what the client replays next time: thinking binds to it
    changes = check_binding(state, body, behavior)
    schema = check_anthropic_format(body)
    msgs = to_msgs(body)
    reply = (
        state.next_reply()
        or decide_builtin(msgs, offered("anthropic", body))
        or decide(msgs, _tools(body), _choice(body), schema)
    )
    content = _content(state, body, reply)
    bind_content(state, sent, content)
    stop = "tool_use" if reply.tool_calls else reply.stop if reply.stop in ("max_tokens", "pause_turn") else "end_turn"
    input_tokens = _input_tokens(body)
    cached = cache_use(state, str(body.get("model")), _segments(body))
    output_tokens = sum(count_value(b) for b in content if b["type"] != "thinking") + sum(
        count_text(b["thinking"]) for b in content if b["type"] == "thinking"
    )
    message_id = new_id("msg_")
    with state.lock:
        state.contexts[message_id] = copy.deepcopy(body["messages"])
    thinking_tokens = sum(count_text(b["thinking"]) for b in content if b["type"] == "thinking")
    usage = {
        "input_tokens": input_tokens - cached.read - cached.write,
        "cache_creation_input_tokens": cached.write,
        "cache_read_input_tokens": cached.read,
        "cache_creation": {"ephemeral_5m_input_tokens": cached.write, "ephemeral_1h_input_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"thinking_tokens": thinking_tokens},
        "service_tier": "standard",
        "inference_geo": "global",
    }
    if reply.builtin:
        usage["server_tool_use"] = anthropic_server_usage(reply.builtin)
    message = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "stop_details": None,
        "usage": usage,
    }
    if behavior is not None or changes:
        message["input_transformations"] = changes
    asked, diagnostics = diagnose(state, sent)
    if asked:
        message["diagnostics"] = diagnostics
        remember(state, message_id, sent)
    named = body.get("container") if isinstance(body.get("container"), str) else None
    if named or any(c.kind == "code_execution" for c in reply.builtin):
        # a named container is the one the code runs in again (its expiry renewed), as the service does
        message["container"] = {"id": named or new_id("container_"), "expires_at": _expiry(state.now())}
    if not body.get("stream"):
        return JSONResponse(message)
    return SSEStream(_frames(message), call.fault, lambda: state.closing, api="anthropic")


_DELTA_USAGE = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


def _frames(message: dict[str, Any]) -> list[bytes]:
    usage = message["usage"]
    start_usage = {k: v for k, v in usage.items() if k not in ("output_tokens_details", "inference_geo")}
    start = {
        **{k: v for k, v in message.items() if k not in ("stop_details", "container")},
        "content": [],
        "stop_reason": None,
        "usage": {**start_usage, "output_tokens": 1},
    }
    frames = [sse("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        empty = {
            "text": {"type": "text", "text": ""},
            "thinking": {"type": "thinking", "thinking": "", "signature": ""},
        }
        opening = empty.get(block["type"], block if block["type"].endswith("_tool_result") else {**block, "input": {}})
        if block.get("citations"):
            opening = {**opening, "citations": []}
        frames.append(
            sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening})
        )
        if index == 0:
            frames.append(sse("ping", {"type": "ping"}))
        for delta in _deltas(block):
            frames.append(sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        frames.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    if "container" in message:  # a stream says the container at its end, on message_delta
        delta["container"] = message["container"]
    frames.append(
        sse(
            "message_delta",
            {"type": "message_delta", "delta": delta, "usage": {k: usage[k] for k in _DELTA_USAGE}},
        )
    )
    frames.append(sse("message_stop", {"type": "message_stop"}))
    return frames


def _expiry(now: int) -> str:
    """When a code-execution container expires: an hour after `now`, as the service writes it."""
    return datetime.fromtimestamp(now + 3600, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _deltas(block: dict[str, Any]) -> list[dict[str, Any]]:
    if block["type"] == "text":
        cited = [{"type": "citations_delta", "citation": c} for c in block.get("citations") or []]
        return cited + [{"type": "text_delta", "text": d} for d in chunks(block["text"])]
    if block["type"].endswith("_tool_result"):
        return []  # a server tool's result arrives whole in its content_block_start
    if block["type"] == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": d} for d in chunks(block["thinking"])]
        return [*deltas, {"type": "signature_delta", "signature": block["signature"]}]
    raw = json.dumps(block["input"], separators=(",", ":"))
    return [{"type": "input_json_delta", "partial_json": raw[i : i + 8]} for i in range(0, len(raw), 8)]
