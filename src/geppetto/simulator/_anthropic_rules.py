"""Anthropic request checks: field shapes, roles, tool_use/tool_result adjacency, thinking blocks."""

from __future__ import annotations

import re
from typing import Any

from ._attachments import CLAUDE_DOCUMENT, CLAUDE_IMAGE
from ._errors import SimError
from ._shapes import Problem, array, find_problem, obj, one_of, scalar, tagged
from ._state import SimState

_THINKING_FIRST = (
    "{where}.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` is enabled, a final "
    "`assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` "
    "blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable "
    "`thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)


_BUDGET_OVER_MAX = (
    "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size"
)
_STR, _BOOL, _INT, _NUM, _DICT = (scalar(k) for k in ("str", "bool", "int", "num", "dict"))
_TEXT = obj({"text": _STR, "cache_control": _DICT, "citations": scalar("any")}, "text")
_SOURCED = obj({"source": _DICT, "cache_control": _DICT}, "source")
_TOOL_REFERENCE = obj({"tool_name": _STR}, "tool_name")
_SEARCH_RESULT = obj({"source": _STR, "title": _STR, "content": array(_TEXT)})
_RESULT_BLOCK = tagged(
    "type",
    {
        "text": _TEXT,
        "image": _SOURCED,
        "document": _SOURCED,
        "search_result": _SEARCH_RESULT,
        "tool_reference": _TOOL_REFERENCE,
    },
)
_SERVER_RESULT = obj({"tool_use_id": _STR, "content": scalar("any")}, "tool_use_id", "content")
SERVER_RESULT_BLOCKS = (
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "advisor_tool_result",
)
"""Results of the service's own (server) tools, sent back as the service produced them."""
_BLOCK = tagged(
    "type",
    {
        "text": _TEXT,
        "image": CLAUDE_IMAGE,
        "document": CLAUDE_DOCUMENT,
        "search_result": _SEARCH_RESULT,
        "thinking": obj({"thinking": _STR, "signature": _STR}, "thinking", "signature"),
        "redacted_thinking": obj({"data": _STR}, "data"),
        "tool_use": obj({"id": _STR, "name": _STR, "input": _DICT}, "id", "name", "input"),
        "tool_result": obj(
            {"tool_use_id": _STR, "content": one_of(_STR, array(_RESULT_BLOCK)), "is_error": _BOOL}, "tool_use_id"
        ),
        "server_tool_use": obj({"id": _STR, "name": _STR, "input": _DICT}, "id", "name", "input"),
        **dict.fromkeys(SERVER_RESULT_BLOCKS, _SERVER_RESULT),
        "mcp_tool_use": obj(
            {"id": _STR, "name": _STR, "server_name": _STR, "input": _DICT}, "id", "name", "server_name", "input"
        ),
        "mcp_tool_result": obj(
            {"tool_use_id": _STR, "content": one_of(_STR, array(_RESULT_BLOCK)), "is_error": _BOOL}, "tool_use_id"
        ),
        "container_upload": obj({"file_id": _STR}, "file_id"),
        "compaction": obj({"content": _STR}),
        # Only in a mid-conversation `system` message: a deferred tool made available from here on.
        "tool_addition": obj({"tool": tagged("type", {"tool_reference": obj({"name": _STR}, "name")})}, "tool"),
    },
)
_MESSAGE = obj(
    {"role": scalar("str", enum=("user", "assistant", "system")), "content": one_of(_STR, array(_BLOCK))},
    "role",
    "content",
)
_CHOICE_FIELDS = {"disable_parallel_tool_use": _BOOL}
_REQUEST = obj(
    {
        "model": _STR,
        "max_tokens": _INT,
        "messages": array(_MESSAGE),
        "system": one_of(_STR, array(tagged("type", {"text": _TEXT}))),
        "tools": array(obj({"name": _STR, "description": _STR, "input_schema": _DICT, "type": _STR}, "name")),
        "tool_choice": tagged(
            "type",
            {
                "auto": obj(_CHOICE_FIELDS),
                "any": obj(_CHOICE_FIELDS),
                "tool": obj({"name": _STR, **_CHOICE_FIELDS}, "name"),
                "none": obj({}),
            },
        ),
        "thinking": tagged(
            "type",
            {"enabled": obj({"budget_tokens": _INT}, "budget_tokens"), "disabled": obj({}), "adaptive": obj({})},
        ),
        "temperature": _NUM,
        "top_p": _NUM,
        "top_k": _INT,
        "stop_sequences": array(_STR),
        "stream": _BOOL,
        "metadata": obj({"user_id": _STR}),
        "output_config": obj(
            {
                "effort": _STR,
                "format": obj({"type": scalar("str", enum=("json_schema",)), "schema": _DICT}, "type", "schema"),
            }
        ),
    },
    "model",
    "max_tokens",
    "messages",
)
_TYPE_WORDS = {
    "str": "Input should be a valid string",
    "bool": "Input should be a valid boolean",
    "int": "Input should be a valid integer",
    "num": "Input should be a valid number",
    "dict": "Input should be a valid dictionary",
    "obj": "Input should be a valid dictionary or object to extract fields from",
    "tagged": "Input should be a valid dictionary or object to extract fields from",
    "list": "Input should be a valid list",
}


def _bad(message: str) -> SimError:
    return SimError(400, message)


def _choices(values: tuple[str, ...] | list[str]) -> str:
    quoted = [f"'{v}'" for v in values]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def _render(problem: Problem) -> SimError:
    """A shape problem in the service's (pydantic) wording: `messages.0.content.0.text.text: Field required`."""
    shape = problem.shape
    if problem.what == "missing":
        text = "Field required"
    elif problem.what == "tag_missing":
        text = f"Unable to extract tag using discriminator '{shape.tag}'"
    elif problem.what == "tag_unknown":
        expected = ", ".join(f"'{t}'" for t in shape.tags)
        text = (
            f"Input tag '{problem.value}' found using '{shape.tag}' does not match any of the expected tags: {expected}"
        )
    elif problem.what == "enum":
        text = f"Input should be {_choices(shape.enum)}"
    else:
        kind = shape.options[-1].kind if shape.kind == "union" else shape.kind
        text = _TYPE_WORDS[kind]
    return _bad(f"{'.'.join(str(p) for p in problem.path)}: {text}")


_NO_SYSTEM_MESSAGES = re.compile(
    r"(^|[/.:])claude-(instant|[123]([-.]|$)|4-|(sonnet|haiku)-4|opus-4(-[0-7]([-@.]|$)|@|$|-\d{8}))", re.IGNORECASE
)
"""The models released before Claude Opus 4.8, which refuse a mid-conversation system message (any other
name, the simulator's own included, takes one)."""


def takes_system_messages(model: str) -> bool:
    """Whether the service takes a ``role: "system"`` message after the first one for ``model``."""
    return not _NO_SYSTEM_MESSAGES.search(model)


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def check_request(state: SimState, body: dict[str, Any]) -> None:
    """Raise the service's 400 for a request it rejects: shapes first, then the conversation rules."""
    problem = find_problem(body, _REQUEST)
    if problem is not None:
        raise _render(problem)
    if body["max_tokens"] < 1:
        raise _bad("max_tokens: Input should be greater than or equal to 1")
    messages = body["messages"]
    if not messages:
        raise _bad("messages: at least one message is required")
    if messages[0]["role"] == "system":
        # A `system` message is a mid-conversation instruction; the conversation's own goes in `system`.
        raise _bad("messages.0.role: Input should be 'user' or 'assistant'")
    if not takes_system_messages(str(body.get("model"))):
        for index, message in enumerate(messages):
            if message["role"] == "system":
                raise _bad(f"messages.{index}.role: role 'system' is not supported on this model")
    _check_tools(messages)
    _check_thinking(state, body)


def _check_tools(messages: list[dict[str, Any]]) -> None:
    for index, message in enumerate(messages):
        blocks = _blocks(message)
        if message["role"] == "user":
            previous = _blocks(messages[index - 1]) if index > 0 and messages[index - 1]["role"] == "assistant" else []
            uses = {str(b.get("id")) for b in previous if b.get("type") == "tool_use"}
            for position, block in enumerate(blocks):
                if block.get("type") == "tool_result" and str(block.get("tool_use_id")) not in uses:
                    raise _bad(
                        f"messages.{index}.content.{position}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding `tool_use` block "
                        "in the previous message."
                    )
            continue
        ids = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
        if not ids:
            continue
        following = (
            _blocks(messages[index + 1]) if index + 1 < len(messages) and messages[index + 1]["role"] == "user" else []
        )
        answered = {str(b.get("tool_use_id")) for b in following if b.get("type") == "tool_result"}
        missing = [i for i in ids if i not in answered]
        if missing:
            raise _bad(
                f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
            )


def _check_thinking(state: SimState, body: dict[str, Any]) -> None:
    messages = body["messages"]
    for index, message in enumerate(messages):
        for position, block in enumerate(_blocks(message)):
            if block.get("type") != "thinking":
                continue
            payload = state.unseal("anthropic", str(block.get("signature", "")))
            if payload is None or payload.get("t") != block.get("thinking"):
                raise _bad(f"messages.{index}.content.{position}: Invalid `signature` in `thinking` block")
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") not in ("enabled", "adaptive"):
        return
    if thinking.get("type") == "enabled":
        if thinking["budget_tokens"] < 1024:
            raise _bad("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        if body["max_tokens"] <= thinking["budget_tokens"]:
            raise _bad(_BUDGET_OVER_MAX)
    last = messages[-1]
    if last["role"] != "user" or not any(b.get("type") == "tool_result" for b in _blocks(last)) or len(messages) < 2:
        return
    assistant = messages[-2]
    blocks = _blocks(assistant)
    first = blocks[0].get("type") if blocks else "text"
    if first not in ("thinking", "redacted_thinking"):
        raise _bad(_THINKING_FIRST.format(where=f"messages.{len(messages) - 2}.content.0", found=first))
