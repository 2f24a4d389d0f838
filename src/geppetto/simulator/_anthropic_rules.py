"""Anthropic request checks: required fields, roles, tool_use/tool_result adjacency, thinking blocks (§5)."""

from __future__ import annotations

from typing import Any

from ._errors import SimError
from ._state import SimState

_THINKING_FIRST = (
    "{where}.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When `thinking` is enabled, a final "
    "`assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` "
    "blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable "
    "`thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)


def _bad(message: str) -> SimError:
    return SimError(400, message)


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def check_request(state: SimState, body: dict[str, Any]) -> None:
    """Raise the service's 400 for a request it rejects."""
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            raise _bad(f"{name}: Field required")
    if not isinstance(body["max_tokens"], int) or isinstance(body["max_tokens"], bool) or body["max_tokens"] < 1:
        raise _bad("max_tokens: Input should be a valid integer greater than or equal to 1")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _bad("messages: Input should be a valid list")
    if not messages:
        raise _bad("messages: at least one message is required")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise _bad(f"messages.{index}.role: Input should be 'user' or 'assistant'")
        if not isinstance(message.get("content"), str | list):
            raise _bad(f"messages.{index}.content: Field required")
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
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < 1024:
            raise _bad("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
    last = messages[-1]
    if last["role"] != "user" or not any(b.get("type") == "tool_result" for b in _blocks(last)) or len(messages) < 2:
        return
    assistant = messages[-2]
    blocks = _blocks(assistant)
    first = blocks[0].get("type") if blocks else "text"
    if first not in ("thinking", "redacted_thinking"):
        raise _bad(_THINKING_FIRST.format(where=f"messages.{len(messages) - 2}.content.0", found=first))
