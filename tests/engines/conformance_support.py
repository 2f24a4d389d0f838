"""Request bodies against the official SDKs' request types.

openai and anthropic publish TypedDicts: pydantic's ``TypeAdapter`` checks types, required keys and
literals, but TypedDicts ignore keys they do not declare, so ``undeclared_keys`` walks the body beside
its type and lists every key no declared shape has. google-genai publishes pydantic models that forbid
unknown fields, in the REST (camelCase) names; they validate each part of a generateContent body.
"""

from __future__ import annotations

import collections.abc
import types
import typing
from typing import Any, get_args, get_origin

import typing_extensions
from anthropic.types.beta.message_create_params import MessageCreateParamsStreaming as BetaMessageCreateParamsStreaming
from anthropic.types.message_create_params import MessageCreateParamsStreaming
from engines_support import consume
from google.genai import types as genai
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from openai.types.responses.input_token_count_params import InputTokenCountParams
from openai.types.responses.response_compact_params import ResponseCompactParams
from openai.types.responses.response_create_params import ResponseCreateParamsStreaming
from pydantic import BaseModel, TypeAdapter
from typing_extensions import get_type_hints, is_typeddict

CHAT = TypeAdapter(CompletionCreateParamsStreaming)
CLAUDE = TypeAdapter(MessageCreateParamsStreaming)
CLAUDE_BETA = TypeAdapter(BetaMessageCreateParamsStreaming)
RESPONSES = TypeAdapter(ResponseCreateParamsStreaming)
COMPACT = TypeAdapter(ResponseCompactParams)
INPUT_TOKENS = TypeAdapter(InputTokenCountParams)

GEMINI_REQUEST_FIELDS: dict[str, Any] = {
    # The top-level fields of a generateContent body (google-genai's models.py writes the config's
    # system_instruction, tools, tool_config, safety_settings and cached_content beside contents).
    "contents": TypeAdapter(list[genai.Content]),
    "systemInstruction": TypeAdapter(genai.Content),
    "tools": TypeAdapter(list[genai.Tool]),
    "toolConfig": TypeAdapter(genai.ToolConfig),
    "generationConfig": TypeAdapter(genai.GenerationConfig),
    "safetySettings": TypeAdapter(list[genai.SafetySetting]),
    "cachedContent": TypeAdapter(str),
}

_WRAPPERS = {
    typing.Annotated,
    typing.Required,
    typing.NotRequired,
    typing_extensions.Required,
    typing_extensions.NotRequired,
}
_SEQUENCES = {list, tuple, collections.abc.Iterable, collections.abc.Sequence}
_MAPPINGS = {dict, collections.abc.Mapping}


def _scalar_fits(value: Any, tp: type) -> bool:
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp in (bool, str, dict, list):
        return isinstance(value, tp)
    return True  # other classes (file types and the like) are left to pydantic


def _walk(value: Any, tp: Any, path: str) -> list[str] | None:
    """Undeclared key paths of ``value`` read as ``tp``, or None when ``value`` cannot be a ``tp`` at all."""
    origin = get_origin(tp)
    if origin in _WRAPPERS:
        return _walk(value, get_args(tp)[0], path)
    if tp in (Any, object):
        return []
    if is_typeddict(tp):
        return _walk_typeddict(value, tp, path)
    if origin in (typing.Union, types.UnionType):
        results = [found for member in get_args(tp) if (found := _walk(value, member, path)) is not None]
        return min(results, key=len) if results else None
    if origin is typing.Literal:
        return [] if value in get_args(tp) else None
    if origin in _SEQUENCES:
        item = get_args(tp)[0] if get_args(tp) else Any
        return _walk_all(((f"{path}[{i}]", v) for i, v in enumerate(value)), item) if isinstance(value, list) else None
    if origin in _MAPPINGS:
        if not isinstance(value, dict):
            return None
        item = get_args(tp)[1] if len(get_args(tp)) == 2 else Any
        return _walk_all(((f"{path}.{k}", v) for k, v in value.items()), item)
    if tp is type(None):
        return [] if value is None else None
    if isinstance(tp, type) and issubclass(tp, BaseModel):  # SDK response models that some params also accept
        if not isinstance(value, dict):
            return None
        names = {n for name, f in tp.model_fields.items() for n in (name, f.alias) if n}
        return [f"{path}.{key}" for key in value if key not in names]
    if isinstance(tp, type):
        return [] if _scalar_fits(value, tp) else None
    return []


def _walk_all(items: collections.abc.Iterable[tuple[str, Any]], tp: Any) -> list[str] | None:
    found: list[str] = []
    for path, value in items:
        sub = _walk(value, tp, path)
        if sub is None:
            return None
        found += sub
    return found


def _walk_typeddict(value: Any, tp: Any, path: str) -> list[str] | None:
    if not isinstance(value, dict):
        return None
    hints = get_type_hints(tp, include_extras=True)
    found = [f"{path}.{key}" for key in value if key not in hints]
    for key in value.keys() & hints.keys():
        sub = _walk(value[key], hints[key], f"{path}.{key}")
        if sub is None:
            return None
        found += sub
    return found


def undeclared_keys(value: Any, tp: Any) -> list[str]:
    """Paths of the dict keys in ``value`` that the TypedDicts of ``tp`` do not declare, through lists, mappings,
    nested TypedDicts and unions (the union member that fits the value and declares the most of its keys)."""
    found = _walk(value, tp, "$")
    return ["$ does not fit the type"] if found is None else found


def check_typed(adapter: TypeAdapter[Any], tp: Any, body: dict[str, Any]) -> dict[str, Any]:
    """Validate ``body`` against an SDK TypedDict and refuse keys it does not declare; returns the validated body."""
    validated: dict[str, Any] = consume(adapter.validate_python(body))
    found = undeclared_keys(body, tp)
    if found:
        raise AssertionError(f"keys the SDK's request type does not declare: {', '.join(found)}")
    return validated


def check_chat(body: dict[str, Any], *, extensions: bool = True) -> dict[str, Any]:
    """A Chat Completions body; ``extensions`` allows the compatible servers' keys (never sent to OpenAI)."""
    messages = body.get("messages") or []
    extended = [f"$.messages[{i}].reasoning_content" for i, m in enumerate(messages) if "reasoning_content" in m]
    if extended and not extensions:
        raise AssertionError(f"keys the SDK's request type does not declare: {', '.join(extended)}")
    plain = {**body, "messages": [{k: v for k, v in m.items() if k != "reasoning_content"} for m in messages]}
    check_typed(CHAT, CompletionCreateParamsStreaming, plain)
    return body


def check_claude(body: dict[str, Any]) -> dict[str, Any]:
    """A Messages body; one that sends ``thinking.block_binding`` (a beta field) is checked against the beta type."""
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and "block_binding" in thinking:
        return check_typed(CLAUDE_BETA, BetaMessageCreateParamsStreaming, body)
    return check_typed(CLAUDE, MessageCreateParamsStreaming, body)


def check_responses(body: dict[str, Any]) -> dict[str, Any]:
    return check_typed(RESPONSES, ResponseCreateParamsStreaming, body)


def check_gemini(body: dict[str, Any]) -> None:
    """Validate every field of a generateContent body with google-genai's models (unknown fields refused)."""
    unknown = sorted(set(body) - set(GEMINI_REQUEST_FIELDS))
    if unknown:
        raise AssertionError(f"fields a generateContent request does not have: {', '.join(unknown)}")
    for name, value in body.items():
        GEMINI_REQUEST_FIELDS[name].validate_python(value)


def check_sent(path: str, body: dict[str, Any]) -> None:
    """Check one request the simulator received, by its path."""
    if path == "/v1/chat/completions":
        check_chat(body)
    elif path == "/v1/messages":
        check_claude(body)
    elif path.endswith((":streamGenerateContent", ":generateContent")):
        check_gemini(body)
    elif path == "/v1/responses":
        check_responses(body)
    elif path == "/v1beta/interactions":
        from interactions_types import validate_request

        validate_request(body)
    elif path == "/v1/responses/compact":
        check_typed(COMPACT, ResponseCompactParams, body)
    elif path == "/v1/responses/input_tokens":
        check_typed(INPUT_TOKENS, InputTokenCountParams, body)
    else:
        raise AssertionError(f"no request type known for {path}")
