"""Anthropic Messages dialect: a Turn as ``system`` + alternating ``user`` / ``assistant`` messages.

- system blocks -> the top-level ``system`` field (a list of text blocks, in order).
- user text and images, and tool results (``tool_result`` blocks, first in their message as the API
  requires) -> ``user`` messages; llm_text, tool calls (``tool_use``) and accepted reasoning ->
  ``assistant`` messages. Consecutive blocks of one side merge into one message, so the turns alternate.
- Reasoning is sent only when Claude can take it back: a thinking block with its ``signature``
  (unmodified), or a ``redacted_thinking`` block Claude produced, and not after the prefix guard found
  its prefix changed (:mod:`._binding`). Anything else (OpenAI encrypted
  reasoning, Gemini thoughts, thinking without a signature) stays in the Turn but is left out.
- ``other`` blocks Claude produced (server tools, MCP, compaction: see :mod:`._blocks`) go back as they
  came, and so do a text block's ``citations`` and the fields kept under ``payload["extra"]``; other
  providers' ``other`` blocks and citations are left out. Attached documents go first in their user
  message (see :mod:`geppetto.providers._files`).
- Tool call ids from other providers are kept, with characters Claude refuses replaced by ``_``.
- With thinking on, the assistant message that the current tool loop continues must start with a
  thinking block. When it does not (its calls came from another provider), thinking is switched off for
  this one request rather than sending a request Claude rejects.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from ..._exceptions import ConfigurationError
from ...output import READ_FROM_TURN, STRUCTURED_OUTPUT, StructuredOutputConfig, wire_schema_encoded
from ...turns import (
    BLOCK_META_PROVIDER,
    PAYLOAD_ARGS,
    PAYLOAD_CITATIONS,
    PAYLOAD_ENCRYPTED_CONTENT,
    PAYLOAD_ERROR,
    PAYLOAD_EXTRA,
    PAYLOAD_ID,
    PAYLOAD_NAME,
    PAYLOAD_SIGNATURE,
    Block,
    BlockKind,
    Turn,
)
from .._files import claude_file_blocks
from .._prefix_guard import REASONING_STALE
from .._streaming import ToolSpec, builtin_specs, image_parts, tool_result_text
from ._binding import guard_request
from ._blocks import PROVIDER, replay_content

__all__ = ["ANTHROPIC_VERSION", "build_messages", "build_request", "wire_tool_id"]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096

Content = dict[str, Any]
Message = dict[str, Any]

_BAD_ID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def wire_tool_id(call_id: str) -> str:
    """A tool call id Claude accepts (``^[a-zA-Z0-9_-]+$``); the same id maps to the same wire id."""
    return _BAD_ID_CHARS.sub("_", call_id) or "call"


def _reasoning_content(block: Block) -> Content | None:
    if REASONING_STALE.get(block.metadata):  # the prefix guard left it out for good
        return None
    signature = block.payload.get(PAYLOAD_SIGNATURE)
    if signature and isinstance(signature, str):
        return {"type": "thinking", "thinking": block.text, "signature": signature}
    data = block.payload.get(PAYLOAD_ENCRYPTED_CONTENT)
    if data and BLOCK_META_PROVIDER.get(block.metadata) == PROVIDER:
        return {"type": "redacted_thinking", "data": data}
    return None


def _user_content(block: Block) -> list[Content]:
    content: list[Content] = []
    if block.text:
        content.append({"type": "text", "text": block.text})
    for kind, value, media_type in image_parts(block):
        if kind == "url":
            content.append({"type": "image", "source": {"type": "url", "url": value}})
        else:
            content.append({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": value}})
    return [*claude_file_blocks(block), *content]  # documents before the question, as Claude advises


def _tool_input(args: Any) -> dict[str, Any]:
    # Claude needs an object; arguments that were not valid JSON were answered with an error anyway.
    return args if isinstance(args, dict) else {}


def _content(block: Block) -> tuple[str, Content | list[Content] | None]:
    """The side ("user" / "assistant" / "") a block belongs to and its content."""
    kind = block.kind
    p = block.payload
    if kind is BlockKind.USER:
        return "user", _user_content(block)
    if kind is BlockKind.TOOL_USE:
        result: Content = {
            "type": "tool_result",
            "tool_use_id": wire_tool_id(str(p.get(PAYLOAD_ID, ""))),
            "content": tool_result_text(block),
        }
        if p.get(PAYLOAD_ERROR) is not None:
            result["is_error"] = True
        return "user", result
    if kind is BlockKind.LLM_TEXT:
        if not block.text.strip():
            return "assistant", None  # Claude refuses blank text blocks
        text: Content = {"type": "text", "text": block.text}
        if p.get(PAYLOAD_CITATIONS) and BLOCK_META_PROVIDER.get(block.metadata) == PROVIDER:
            text["citations"] = p[PAYLOAD_CITATIONS]
        return "assistant", text
    if kind is BlockKind.TOOL_CALL:
        call = {
            "type": "tool_use",
            "id": wire_tool_id(str(p.get(PAYLOAD_ID, ""))),
            "name": str(p.get(PAYLOAD_NAME, "")),
            "input": _tool_input(p.get(PAYLOAD_ARGS)),
        }
        return "assistant", call
    if kind is BlockKind.REASONING:
        return "assistant", _reasoning_content(block)
    if kind is BlockKind.OTHER:
        return "assistant", replay_content(block)
    return "", None


def _append(messages: list[Message], role: str, content: Content | list[Content]) -> None:
    items = content if isinstance(content, list) else [content]
    if not items:
        return
    if messages and messages[-1]["role"] == role:
        messages[-1]["content"].extend(items)
    else:
        messages.append({"role": role, "content": list(items)})


def build_messages(turn: Turn, origin: dict[int, Block] | None = None) -> tuple[list[Content], list[Message]]:
    """``(system, messages)`` for ``turn`` (see the module docstring for the mapping). ``origin``, when
    given, maps each content object (by ``id``) to the block it came from (the prefix guard reads it)."""
    system: list[Content] = []
    messages: list[Message] = []
    for block in turn.blocks:
        if block.kind is BlockKind.SYSTEM:
            if block.text:
                system.append({"type": "text", "text": block.text})
            continue
        role, content = _content(block)
        if (
            isinstance(content, dict)
            and block.payload.get(PAYLOAD_EXTRA)
            and BLOCK_META_PROVIDER.get(block.metadata) == PROVIDER
        ):
            content = {**content, **block.payload[PAYLOAD_EXTRA]}
        if role and content is not None:
            if origin is not None:
                for part in content if isinstance(content, list) else [content]:
                    origin[id(part)] = block
            _append(messages, role, content)
    for msg in messages:
        if msg["role"] == "user":
            # Tool results must open the user message that answers the calls.
            msg["content"].sort(key=lambda c: c["type"] != "tool_result")
    return system, messages


def thinking_replay_ok(messages: list[Message]) -> bool:
    """True when the assistant message a tool loop continues starts with (redacted) thinking, or there is
    no such message (the conversation ends with a user's own words)."""
    if len(messages) < 2 or messages[-1]["role"] != "user":
        return True
    if not any(c["type"] == "tool_result" for c in messages[-1]["content"]):
        return True
    first = messages[-2]["content"][0] if messages[-2]["content"] else {}
    return first.get("type") in ("thinking", "redacted_thinking")


def _tool_choice(choice: str) -> dict[str, Any]:
    if choice == "auto":
        return {"type": "auto"}
    if choice == "none":
        return {"type": "none"}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": choice}


def build_request(
    turn: Turn,
    *,
    model: str,
    tools: list[ToolSpec],
    tool_choice: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    thinking_budget: int | None = None,
    output: Any = READ_FROM_TURN,
    builtin_tools: list[dict[str, Any]] | None = None,
    stream: bool = True,
    prefix_policy: str | None = None,
) -> dict[str, Any]:
    """The streaming (``stream=False``: whole) ``POST /v1/messages`` body for ``turn``.

    ``prefix_policy`` (``drop``/``rewrite``/``error``) runs the prefix guard on replayed thinking
    (:mod:`._binding`); None sends the Turn's thinking as it is.

    ``max_tokens`` is required by the API: the default is 4096, plus ``thinking_budget`` when thinking is
    on (the budget must be smaller than ``max_tokens``). With thinking on, ``temperature`` is not sent
    (Claude only allows the default then).
    """
    if thinking_budget is not None and tool_choice not in (None, "auto", "none"):
        raise ConfigurationError(
            f"Claude cannot think while tool_choice forces a tool ({tool_choice!r}); "
            "use tool_choice='auto' or drop thinking_budget"
        )
    origin: dict[int, Block] = {}
    system, messages = build_messages(turn, origin)
    thinking = thinking_budget is not None
    limit = max_tokens if max_tokens is not None else DEFAULT_MAX_TOKENS + (thinking_budget or 0)
    body: dict[str, Any] = {"model": model, "max_tokens": limit, "messages": messages, "stream": stream}
    if system:
        body["system"] = system
    if tools or builtin_tools:
        functions = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]
        body["tools"] = functions + builtin_specs(
            builtin_tools or [],
            "Claude",
            '{"type": "web_search_20250305", "name": "web_search"}',
            lambda tool: isinstance(tool.get("type"), str) and bool(tool["type"]),
        )
        if tool_choice is not None:
            body["tool_choice"] = _tool_choice(tool_choice)
    if thinking:
        body["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
    elif temperature is not None:
        body["temperature"] = temperature
    if output is READ_FROM_TURN:
        output = STRUCTURED_OUTPUT.get(turn.data)
    if output is not None:
        _ask_output(body, output, model, thinking=thinking and thinking_replay_ok(messages), tool_choice=tool_choice)
    if prefix_policy is not None:  # on the final system, tools and messages: what Claude binds
        guard_request(turn, body, origin, policy=prefix_policy, model=model)
    if thinking and not thinking_replay_ok(body["messages"]):
        del body["thinking"]  # the continued tool loop's assistant message has no thinking to start with
        if temperature is not None:
            body["temperature"] = temperature
    return body


_NATIVE_FROM = (4, 5)
_CLAUDE_VERSION = re.compile(r"claude-(?:opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?:\D|$)")


def output_mode(output: StructuredOutputConfig, model: str) -> str:
    """``"native"`` (``output_config.format``) or ``"tool"`` (a forced answer tool) for ``model``.

    ``auto`` picks native for Claude 4.5 and later (``claude-sonnet-4-5``, ``claude-opus-4-6``, ...) and
    for model names that are not Claude's (a compatible server), and the tool for older Claude models
    (``claude-3-5-sonnet-...``, ``claude-sonnet-4-0``, ``claude-opus-4-1``), which lack native structured output.
    """
    return output.mode if output.mode != "auto" else _auto_mode(model)


@functools.lru_cache(maxsize=64)
def _auto_mode(model: str) -> str:
    name = model.lower()
    if not name.startswith("claude"):
        return "native"
    found = _CLAUDE_VERSION.search(name)
    if found is None:
        return "tool"
    version = (int(found.group(1)), int(found.group(2) or 0))
    return "native" if version >= _NATIVE_FROM else "tool"


def answer_tool(output: StructuredOutputConfig | None, model: str) -> str | None:
    """The name of the tool whose call is the structured answer, when ``output`` asks for tool mode."""
    if output is None or output_mode(output, model) != "tool":
        return None
    return output.name


def _ask_output(
    body: dict[str, Any], output: StructuredOutputConfig, model: str, *, thinking: bool, tool_choice: str | None
) -> None:
    schema = wire_schema_encoded(output, "anthropic")
    if output_mode(output, model) == "native":
        body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        return
    tools = body.setdefault("tools", [])
    if any(t.get("name") == output.name for t in tools):
        raise ConfigurationError(
            f"the structured output is named {output.name!r}, like one of the tools, and Claude's tool mode "
            "offers it as a tool: pass output_config(..., name='another_name')"
        )
    description = output.description or "Give your final answer by calling this tool, with the answer as its input."
    tools.append({"name": output.name, "description": description, "input_schema": schema})
    if thinking:
        body["tool_choice"] = {"type": "auto"}  # Claude refuses a forced tool while thinking
    elif len(tools) == 1 or tool_choice == "none":
        body["tool_choice"] = {"type": "tool", "name": output.name}
    else:
        body["tool_choice"] = {"type": "any"}
