"""OpenAI Responses input items: normalization, id assignment and the server's context checks."""

from __future__ import annotations

import copy
import json
from typing import Any

from ._attachments import responses_files
from ._errors import SimError
from ._model import Msg, ToolSpec
from ._state import SimState, new_id
from ._validate import enum_error

_OUTPUT_TYPES = frozenset(
    {"function_call", "message", "web_search_call", "file_search_call", "code_interpreter_call", "custom_tool_call"}
)
_ASSISTANT_PARTS = ["output_text", "refusal"]
_ID_PREFIX = {"message": "msg_", "function_call": "fc_", "function_call_output": "fco_", "reasoning": "rs_"}


def _bad(message: str, param: str | None = "input", status: int = 400, code: str | None = None) -> SimError:
    return SimError(status, message, param=param, code=code)


def _not_persisted(item_id: str) -> SimError:
    return _bad(
        f"Item with id '{item_id}' not found. Items are not persisted when `store` is set to false. Try again "
        "with `store` set to true, or remove this item from your input.",
        status=404,
    )


def _parts(role: str, content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        kind = "output_text" if role == "assistant" else "input_text"
        part: dict[str, Any] = {"type": kind, "text": content}
        if kind == "output_text":
            part["annotations"] = []
        return [part]
    return copy.deepcopy(content) if isinstance(content, list) else []


def normalize_item(state: SimState, raw: Any, index: int) -> dict[str, Any]:
    """One input item in stored form (ids assigned, string content expanded, references resolved)."""
    where = f"input[{index}]"
    if not isinstance(raw, dict):
        raise _bad(f"Invalid type for '{where}': expected an object, but got {type(raw).__name__} instead.", where)
    item = copy.deepcopy(raw)
    kind = item.get("type") or ("message" if "role" in item else "item_reference" if "id" in item else None)
    if kind is None:
        raise _bad(f"Missing required parameter: '{where}.type'.", f"{where}.type", code="missing_required_parameter")
    if kind == "item_reference":
        ref = state.items.get(str(item.get("id")))
        if ref is None:
            raise _not_persisted(str(item.get("id")))
        return copy.deepcopy(ref)
    item["type"] = kind
    if kind == "message":
        role = str(item.get("role", "user"))
        item["role"] = role
        item["content"] = _parts(role, item.get("content"))
        if role == "assistant":
            _check_assistant_parts(item["content"], where)
    elif kind == "function_call_output":
        if not item.get("call_id"):
            raise _bad(
                f"Missing required parameter: '{where}.call_id'.", f"{where}.call_id", code="missing_required_parameter"
            )
    elif kind == "reasoning":
        _check_reasoning(state, item, where)
    elif kind == "compaction":
        _check_compaction(state, item, where)
        return item
    item.setdefault("status", "completed")
    if not item.get("id"):
        item["id"] = new_id(_ID_PREFIX.get(kind, "item_"))
    return item


def _check_assistant_parts(parts: list[Any], where: str) -> None:
    """An assistant message holds what the model writes: `output_text` or `refusal` parts, never `input_*`."""
    for index, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if isinstance(kind, str) and kind not in _ASSISTANT_PARTS:
            raise enum_error(kind, _ASSISTANT_PARTS, f"{where}.content[{index}].type")


def _check_reasoning(state: SimState, item: dict[str, Any], where: str) -> None:
    item_id = str(item.get("id") or "")
    if not item_id:
        raise _bad(f"Missing required parameter: '{where}.id'.", f"{where}.id", code="missing_required_parameter")
    blob = item.get("encrypted_content")
    if blob is None:
        if item_id not in state.items:
            raise _not_persisted(item_id)
        return
    payload = state.unseal("openai", str(blob))
    if payload is None or payload.get("id") != item_id:
        raise _bad(f"The encrypted content for item {item_id} could not be verified.", code="invalid_encrypted_content")


def _check_compaction(state: SimState, item: dict[str, Any], where: str) -> None:
    blob = item.get("encrypted_content")
    if not isinstance(blob, str) or not blob:
        raise _bad(
            f"Missing required parameter: '{where}.encrypted_content'.",
            f"{where}.encrypted_content",
            code="missing_required_parameter",
        )
    payload = state.unseal("openai", blob)
    if payload is None:
        raise _bad(
            "The encrypted content of the compaction item could not be verified.", code="invalid_encrypted_content"
        )
    item.setdefault("id", payload.get("id"))
    item["summary"] = payload.get("t", "")  # what the scripted model reads; never sent back


def normalize_input(state: SimState, value: Any) -> list[dict[str, Any]]:
    """The request's `input` as a list of stored-form items."""
    if value is None:
        return []
    if isinstance(value, str):
        return [normalize_item(state, {"type": "message", "role": "user", "content": value}, 0)]
    if not isinstance(value, list):
        raise _bad(f"Invalid type for 'input': expected a string or an array, but got {type(value).__name__} instead.")
    return [normalize_item(state, raw, i) for i, raw in enumerate(value)]


def check_context(state: SimState, context: list[dict[str, Any]]) -> None:
    """Reject a context the real service rejects: duplicates, orphan outputs, unanswered calls, reasoning pairing."""
    seen: set[str] = set()
    for item in context:
        item_id = item.get("id")
        if item_id:
            if item_id in seen:
                raise _bad(
                    f"Duplicate item found with id {item_id}. Remove duplicate items from your input and try again."
                )
            seen.add(item_id)
    calls = [str(i.get("call_id")) for i in context if i.get("type") == "function_call"]
    outputs = {str(i.get("call_id")) for i in context if i.get("type") == "function_call_output"}
    for item in context:
        if item.get("type") == "function_call_output" and str(item.get("call_id")) not in calls:
            raise _bad(f"No tool call found for function call output with call_id {item.get('call_id')}.")
    for call_id in calls:
        if call_id not in outputs:
            raise _bad(f"No tool output found for function call {call_id}.")
    _check_reasoning_pairs(state, context)


def _check_reasoning_pairs(state: SimState, context: list[dict[str, Any]]) -> None:
    earlier: set[str] = set()
    for index, item in enumerate(context):
        kind = item.get("type")
        item_id = str(item.get("id") or "")
        if kind == "reasoning":
            following = context[index + 1] if index + 1 < len(context) else None
            if (
                following is None
                or following.get("type") not in _OUTPUT_TYPES
                or following.get("role", "assistant") != "assistant"
            ):
                raise _bad(f"Item '{item_id}' of type 'reasoning' was provided without its required following item.")
        rs_id = state.produced_by.get(item_id)
        if rs_id is not None and rs_id not in earlier:
            raise _bad(
                f"Item '{item_id}' of type '{kind}' was provided without its required 'reasoning' item: '{rs_id}'."
            )
        earlier.add(item_id)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or p.get("refusal") or "") for p in content if isinstance(p, dict))
    return ""


def to_msgs(items: list[dict[str, Any]], instructions: str | None = None) -> list[Msg]:
    """The neutral model view of Responses items."""
    msgs = [Msg("system", instructions)] if instructions else []
    for item in items:
        kind = item.get("type")
        if kind == "message":
            role = str(item.get("role"))
            msgs.append(
                Msg(
                    "assistant" if role == "assistant" else "user" if role == "user" else "system",
                    _text_of(item.get("content")),
                )
            )
            msgs.extend(responses_files(item.get("content")) if role == "user" else [])
        elif kind == "function_call":
            msgs.append(
                Msg("call", str(item.get("arguments", "")), str(item.get("name", "")), str(item.get("call_id")))
            )
        elif kind == "function_call_output":
            out = item.get("output")
            msgs.append(Msg("result", out if isinstance(out, str) else _text_of(out), call_id=str(item.get("call_id"))))
        elif kind == "compaction":
            msgs.append(Msg("user", str(item.get("summary") or "")))
    return msgs


def tool_specs(tools: Any) -> list[ToolSpec]:
    """Function tools offered in a Responses request."""
    specs = []
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and tool.get("type") == "function" and tool.get("name"):
            raw_params = tool.get("parameters")
            params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
            specs.append(ToolSpec(str(tool["name"]), str(tool.get("description") or ""), params))
    return specs


def tool_choice(value: Any) -> str:
    """A Responses/Chat `tool_choice` as "auto", "none", "required" or a forced tool name."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if value.get("type") == "function":
            fn = value.get("function")
            inner: dict[str, Any] = fn if isinstance(fn, dict) else value
            return str(inner.get("name", "auto"))
        if value.get("type") == "allowed_tools":
            return str(value.get("mode", "auto"))
    return "auto"


def arguments_json(args: dict[str, Any] | str) -> str:
    """Tool-call arguments as the JSON string the wire carries (a raw string is sent unchanged)."""
    return args if isinstance(args, str) else json.dumps(args, separators=(",", ":"))
