"""Chat Completions dialect: a Turn as ``messages`` and the request body around them.

Blocks map to messages in order: system -> ``system``, user -> ``user`` (text, or text and image parts),
a run of llm_text / tool_call blocks -> one ``assistant`` message (``content`` null when it only calls
tools), tool_use -> a ``tool`` message answering its ``tool_call_id``.

Reasoning a Chat Completions server produced is replayed as DeepSeek-style ``reasoning_content`` on its
assistant messages, in every exchange (from one user message to the next) in which the model called
tools, and only there: DeepSeek's thinking mode requires it back for such exchanges in all later
requests (400 otherwise) and ignores it elsewhere, while its older reasoner, which never called tools,
refused it. Any other reasoning (OpenAI encrypted items, Claude thinking, Gemini thoughts) stays in the
Turn but is not sent. For a server in thinking mode (``thinking=True``), every assistant message of such
an exchange carries ``reasoning_content``, empty where the Turn has none from this server (tool calls
another provider made before the session moved here), since DeepSeek refuses the field's absence.
"""

from __future__ import annotations

import json
from typing import Any

from ...output import READ_FROM_TURN, STRUCTURED_OUTPUT, wire_schema_encoded
from ...turns import BLOCK_META_PROVIDER, PAYLOAD_ARGS, PAYLOAD_EXTRA, PAYLOAD_ID, PAYLOAD_NAME, Block, BlockKind, Turn
from .._files import chat_file_parts
from .._streaming import ToolSpec, image_parts, is_openai_reasoning_model, parse_args, tool_result_text

__all__ = ["PROVIDER", "build_messages", "build_request"]

PROVIDER = "openai_chat"

Message = dict[str, Any]


def _user_message(block: Block) -> Message:
    images = image_parts(block)
    files = chat_file_parts(block)
    if not images and not files:
        return {"role": "user", "content": block.text}
    parts: list[dict[str, Any]] = [{"type": "text", "text": block.text}] if block.text else []
    for kind, value, media_type in images:
        url = value if kind == "url" else f"data:{media_type};base64,{value}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": "user", "content": [*parts, *files]}


def _own_extra(block: Block) -> dict[str, Any]:
    """What a block a Chat server produced keeps under ``payload["extra"]``: ``message`` (fields of its
    assistant message) and ``call`` (fields of its tool call), both only for ``server`` (its base URL),
    and ``arguments`` (the arguments text as sent)."""
    extra = block.payload.get(PAYLOAD_EXTRA)
    if not isinstance(extra, dict) or BLOCK_META_PROVIDER.get(block.metadata) != PROVIDER:
        return {}
    return extra


def _arguments(block: Block) -> str:
    """A call's arguments as JSON text: the text the server sent when the arguments are still what it meant
    (so the call goes back exactly as it came), else freshly written."""
    args = block.payload.get(PAYLOAD_ARGS)
    if isinstance(args, str):
        return args
    sent = _own_extra(block).get("arguments")
    if isinstance(sent, str) and parse_args(sent) == args:
        return sent
    return json.dumps(args if args is not None else {}, ensure_ascii=False)


class _Assistant:
    """The assistant message being assembled from a run of blocks."""

    def __init__(self, pad_reasoning: bool = False) -> None:
        self.text: list[str] = []
        self.calls: list[dict[str, Any]] = []
        self.reasoning: list[str] = []
        self.pad_reasoning = pad_reasoning
        self.extra: dict[str, Any] = {}
        """Message fields geppetto has no name for, as the server sent them (Gemini's ``extra_content``)."""

    def message(self) -> Message | None:
        text = "".join(self.text)
        if not text and not self.calls:
            return None
        msg: Message = {"role": "assistant", "content": text or None}
        if self.calls:
            msg["tool_calls"] = self.calls
        if self.reasoning or self.pad_reasoning:
            msg["reasoning_content"] = "".join(self.reasoning)
        return {**self.extra, **msg}


def _exchanges_with_calls(turn: Turn) -> list[bool]:
    """For each block: whether the exchange it belongs to (user message to user message) has a tool call."""
    exchange, spans = 0, [0] * len(turn.blocks)
    with_calls: set[int] = set()
    for i, block in enumerate(turn.blocks):
        exchange += block.kind is BlockKind.USER
        spans[i] = exchange
        if block.kind is BlockKind.TOOL_CALL:
            with_calls.add(exchange)
    return [span in with_calls for span in spans]


def build_messages(
    turn: Turn,
    *,
    system_role: str = "system",
    reasoning_content: bool = True,
    thinking: bool = False,
    server: str = "",
) -> list[Message]:
    """The turn as Chat Completions messages (see the module docstring for the mapping). ``reasoning_content``
    False never sends reasoning (OpenAI's own API has no such field); ``thinking`` (with it) gives every
    assistant message of an exchange with tool calls a ``reasoning_content``, empty when none is known."""
    out: list[Message] = []
    current: _Assistant | None = None
    replay = _exchanges_with_calls(turn) if reasoning_content else [False] * len(turn.blocks)

    def flush() -> None:
        nonlocal current
        if current is not None and (msg := current.message()) is not None:
            out.append(msg)
        current = None

    for i, block in enumerate(turn.blocks):
        kind = block.kind
        if kind in (BlockKind.LLM_TEXT, BlockKind.TOOL_CALL, BlockKind.REASONING):
            if current is None or (current.calls and kind is not BlockKind.TOOL_CALL):
                flush()
                current = _Assistant(pad_reasoning=thinking and replay[i])
            own = _own_extra(block)
            fields = own if own.get("server", "") == server else {}  # another server may refuse its fields
            current.extra.update(fields.get("message") or {})
            if kind is BlockKind.LLM_TEXT:
                current.text.append(block.text)
            elif kind is BlockKind.TOOL_CALL:
                p = block.payload
                call = {
                    "id": str(p.get(PAYLOAD_ID, "")),
                    "type": "function",
                    "function": {"name": str(p.get(PAYLOAD_NAME, "")), "arguments": _arguments(block)},
                }
                current.calls.append({**(fields.get("call") or {}), **call})
            elif replay[i] and block.text and BLOCK_META_PROVIDER.get(block.metadata) == PROVIDER:
                current.reasoning.append(block.text)
            continue
        flush()
        if kind is BlockKind.SYSTEM:
            out.append({"role": system_role, "content": block.text})
        elif kind is BlockKind.USER:
            out.append(_user_message(block))
        elif kind is BlockKind.TOOL_USE:
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": str(block.payload.get(PAYLOAD_ID, "")),
                    "content": tool_result_text(block),
                }
            )
    flush()
    return out


def _tool_choice(choice: str) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def build_request(
    turn: Turn,
    *,
    model: str,
    tools: list[ToolSpec],
    tool_choice: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    max_tokens_field: str = "max_tokens",
    reasoning_effort: str | None = None,
    system_role: str = "system",
    stream_usage: bool = True,
    reasoning_content: bool = True,
    thinking: bool = False,
    output: Any = READ_FROM_TURN,
    server: str = "",
    stream: bool = True,
) -> dict[str, Any]:
    """The streaming (``stream=False``: whole) ``POST /chat/completions`` body for ``turn``.

    ``max_tokens_field`` is ``max_completion_tokens`` for OpenAI itself (its reasoning models refuse
    ``max_tokens``) and ``max_tokens`` for compatible servers, most of which only know that one.
    ``temperature`` is left out for OpenAI reasoning models (:func:`is_openai_reasoning_model`), which refuse it.
    ``reasoning_content`` False leaves reasoning out even where DeepSeek-style servers want it back;
    ``thinking`` marks a server in DeepSeek-style thinking mode (see :func:`build_messages`).
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": build_messages(
            turn, system_role=system_role, reasoning_content=reasoning_content, thinking=thinking, server=server
        ),
        "stream": stream,
    }
    if stream_usage and stream:
        body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in tools
        ]
        if tool_choice is not None:
            body["tool_choice"] = _tool_choice(tool_choice)
    if temperature is not None and not is_openai_reasoning_model(model):
        body["temperature"] = temperature
    if max_tokens is not None:
        body[max_tokens_field] = max_tokens
    if reasoning_effort is not None:
        body["reasoning_effort"] = reasoning_effort
    if output is READ_FROM_TURN:
        output = STRUCTURED_OUTPUT.get(turn.data)
    if output is not None:
        spec: dict[str, Any] = {
            "name": output.name,
            "schema": wire_schema_encoded(output, "openai"),
            "strict": output.strict,
        }
        if output.description:
            spec["description"] = output.description
        body["response_format"] = {"type": "json_schema", "json_schema": spec}
    return body
