"""Gemini dialect: a Turn as ``systemInstruction`` + alternating ``user`` / ``model`` contents.

- system blocks -> ``systemInstruction.parts``.
- user text and images, and tool results (``functionResponse`` parts, first in their content, named after
  the matching tool_call block since Gemini needs the name) -> ``user`` contents; llm_text,
  ``functionCall`` parts and Gemini's own thoughts -> ``model`` contents. Consecutive blocks of one side
  merge, so roles alternate.
- Thought signatures are replayed exactly, on the part they came with. Google checks them only in the
  current turn (every step since the last user message that is not just function responses): there the
  first function call of each model step must carry one. Gemini 3, and any model thinking, refuses such
  a step without one; so for those a step whose first call has none (calls from another provider, or
  Gemini's own calls made without thinking) gets the placeholder Google documents for that case
  (``skip_thought_signature_validator``). Older turns and other models are sent as they are.
- Reasoning Gemini did not produce (OpenAI encrypted items, Claude thinking) stays in the Turn, unsent.
- ``other`` blocks Gemini produced (code execution, server tools, images, bare signatures: see
  :mod:`._parts`) go back as the parts they came as; other providers' are left out. Attached files
  follow the user's text and images as ``inlineData`` / ``fileData``.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from ..._json import dumps
from ...output import READ_FROM_TURN, STRUCTURED_OUTPUT, StructuredOutputConfig, wire_schema, wire_schema_encoded
from ...turns import (
    BLOCK_META_PROVIDER,
    PAYLOAD_ARGS,
    PAYLOAD_ERROR,
    PAYLOAD_EXTRA,
    PAYLOAD_ID,
    PAYLOAD_NAME,
    PAYLOAD_RESULT,
    PAYLOAD_THOUGHT_SIGNATURE,
    Block,
    BlockKind,
    Turn,
)
from .._files import gemini_file_parts
from .._prefix_guard import REASONING_STALE
from .._streaming import ToolSpec, builtin_specs, call_names, image_parts
from ._binding import guard_contents
from ._parts import PROVIDER, replay_part

__all__ = [
    "FOREIGN_CALL_SIGNATURE",
    "build_contents",
    "build_request",
    "model_path",
    "needs_signed_calls",
    "sign_current_turn",
]

FOREIGN_CALL_SIGNATURE = "skip_thought_signature_validator"
"""Google's documented stand-in signature for function calls that carry no signature of their own."""

Part = dict[str, Any]
Content = dict[str, Any]


def model_path(model: str) -> str:
    """``models/<model>`` whether or not the caller wrote the prefix."""
    return model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"


def _signed(part: Part, block: Block) -> Part:
    signature = block.payload.get(PAYLOAD_THOUGHT_SIGNATURE)
    if signature and not REASONING_STALE.get(block.metadata):  # the prefix guard may have left it out
        part["thoughtSignature"] = signature
    return part


def _user_parts(block: Block) -> list[Part]:
    parts: list[Part] = [{"text": block.text}] if block.text else []
    for kind, value, media_type in image_parts(block):
        if kind == "url":
            parts.append({"fileData": {"fileUri": value, "mimeType": media_type or "image/png"}})
        else:
            parts.append({"inlineData": {"mimeType": media_type, "data": value}})
    return [*parts, *gemini_file_parts(block)]


def _function_response(block: Block, names: dict[str, str]) -> Part:
    p = block.payload
    call_id = str(p.get(PAYLOAD_ID, ""))
    name = str(p.get(PAYLOAD_NAME) or names.get(call_id) or "unknown_function")
    error = p.get(PAYLOAD_ERROR)
    response: dict[str, Any] = {"error": error} if error is not None else {"output": p.get(PAYLOAD_RESULT)}
    if error is not None and p.get(PAYLOAD_RESULT) not in (None, ""):
        response["output"] = p.get(PAYLOAD_RESULT)
    return {"functionResponse": {"id": call_id, "name": name, "response": response}}


def needs_signed_calls(model: str, thinking_budget: int | None = None) -> bool:
    """True when the current turn's function calls must be signed: Gemini 3 models, or thinking switched on."""
    return model.removeprefix("models/").startswith("gemini-3") or thinking_budget not in (None, 0)


def _parts(block: Block, names: dict[str, str]) -> tuple[str, list[Part]]:
    """The role ("user" / "model" / "") a block belongs to and its parts; the fields of its part geppetto
    has no name for go back on it when Gemini produced it."""
    role, parts = _bare_parts(block, names)
    extra = block.payload.get(PAYLOAD_EXTRA)
    if role == "model" and len(parts) == 1 and extra and BLOCK_META_PROVIDER.get(block.metadata) == PROVIDER:
        parts = [{**parts[0], **extra}]
    return role, parts


def _bare_parts(block: Block, names: dict[str, str]) -> tuple[str, list[Part]]:
    kind = block.kind
    p = block.payload
    if kind is BlockKind.USER:
        return "user", _user_parts(block)
    if kind is BlockKind.TOOL_USE:
        return "user", [_function_response(block, names)]
    if kind is BlockKind.LLM_TEXT:
        if not block.text and not p.get(PAYLOAD_THOUGHT_SIGNATURE):
            return "model", []
        return "model", [_signed({"text": block.text}, block)]
    if kind is BlockKind.TOOL_CALL:
        args = p.get(PAYLOAD_ARGS)
        call: Part = {
            "functionCall": {
                "id": str(p.get(PAYLOAD_ID, "")),
                "name": str(p.get(PAYLOAD_NAME, "")),
                "args": args if isinstance(args, dict) else {},
            }
        }
        return "model", [_signed(call, block)]
    if kind is BlockKind.REASONING and p.get(PAYLOAD_THOUGHT_SIGNATURE) and not REASONING_STALE.get(block.metadata):
        return "model", [_signed({"text": block.text, "thought": True}, block)]
    if kind is BlockKind.OTHER:
        part = replay_part(block)
        return ("model", [part]) if part is not None else ("", [])
    return "", []


def sign_current_turn(contents: list[Content]) -> None:
    """Give the first function call of each model step in the current turn the placeholder signature when it has
    none (see the module docstring)."""
    start = 0
    for index, content in enumerate(contents):
        if content["role"] == "user" and any("functionResponse" not in part for part in content["parts"]):
            start = index + 1
    for content in contents[start:]:
        calls = [part for part in content["parts"] if "functionCall" in part]
        if content["role"] == "model" and calls and "thoughtSignature" not in calls[0]:
            calls[0]["thoughtSignature"] = FOREIGN_CALL_SIGNATURE


def build_contents(
    turn: Turn, *, sign_calls: bool = False, origin: dict[int, Block] | None = None
) -> tuple[list[Part], list[Content]]:
    """``(system parts, contents)`` for ``turn`` (see the module docstring for the mapping). ``origin``,
    when given, maps each part (by ``id``) to the block it came from (the prefix guard reads it)."""
    names = call_names(turn)
    system: list[Part] = []
    contents: list[Content] = []
    for block in turn.blocks:
        if block.kind is BlockKind.SYSTEM:
            if block.text:
                system.append({"text": block.text})
            continue
        role, parts = _parts(block, names)
        if not role or not parts:
            continue
        if origin is not None:
            origin.update((id(part), block) for part in parts)
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": list(parts)})
    for content in contents:
        if content["role"] == "user":
            # Function responses answer the previous model turn's calls; keep them ahead of new words.
            content["parts"].sort(key=lambda part: "functionResponse" not in part)
    if sign_calls:
        sign_current_turn(contents)
    return system, contents


def _one_tool(tool: dict[str, Any]) -> bool:
    """Gemini's form of a built-in tool: one key naming it, its settings as an object."""
    return len(tool) == 1 and isinstance(next(iter(tool.values())), dict)


_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


def _add_tools(
    body: dict[str, Any], tools: list[ToolSpec], tool_choice: str | None, builtin_tools: list[dict[str, Any]] | None
) -> None:
    """The function declarations (first), the built-in tools and the tool choice into ``body``."""
    if builtin_tools:
        body["tools"] = builtin_specs(
            builtin_tools, "Gemini", '{"googleSearch": {}} or {"codeExecution": {}}', _one_tool
        )
    if tools:
        declarations = [
            {"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters} for t in tools
        ]
        body["tools"] = [{"functionDeclarations": declarations}, *body.get("tools", [])]
        if tool_choice is not None:
            config: dict[str, Any] = {"mode": _MODES.get(tool_choice, "ANY")}
            if tool_choice not in _MODES:
                config["allowedFunctionNames"] = [tool_choice]
            body["toolConfig"] = {"functionCallingConfig": config}


def _generation(
    temperature: float | None, max_tokens: int | None, thinking_budget: int | None, include_thoughts: bool | None
) -> dict[str, Any]:
    """``generationConfig`` without the output part: sampling, length and ``thinkingConfig``."""
    generation: dict[str, Any] = {}
    if temperature is not None:
        generation["temperature"] = temperature
    if max_tokens is not None:
        generation["maxOutputTokens"] = max_tokens
    thinking: dict[str, Any] = {}
    if thinking_budget is not None:
        thinking["thinkingBudget"] = thinking_budget
    if include_thoughts is not None or thinking_budget is not None:
        thinking["includeThoughts"] = include_thoughts if include_thoughts is not None else thinking_budget != 0
    if thinking:
        generation["thinkingConfig"] = thinking
    return generation


def build_request(
    turn: Turn,
    *,
    tools: list[ToolSpec],
    tool_choice: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    thinking_budget: int | None = None,
    include_thoughts: bool | None = None,
    sign_calls: bool = False,
    model: str = "",
    output: Any = READ_FROM_TURN,
    builtin_tools: list[dict[str, Any]] | None = None,
    prefix_policy: str | None = None,
) -> dict[str, Any]:
    """The ``streamGenerateContent`` (or ``generateContent``) body for ``turn`` (the model is in the URL).

    Tool parameters go out as ``parametersJsonSchema`` (full JSON Schema, unlike ``parameters``).
    ``thinking_budget`` (-1 lets the model decide) and ``include_thoughts`` fill ``thinkingConfig``;
    thoughts are included by default when a budget is given. ``sign_calls`` puts the placeholder signature
    where the current turn needs one (see :func:`sign_current_turn` and :func:`needs_signed_calls`).
    ``prefix_policy`` runs the prefix guard on replayed thought signatures (:mod:`._binding`).
    """
    origin: dict[int, Block] = {}
    system, contents = build_contents(turn, origin=origin)
    body: dict[str, Any] = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": system}
    _add_tools(body, tools, tool_choice, builtin_tools)
    generation = _generation(temperature, max_tokens, thinking_budget, include_thoughts)
    if output is READ_FROM_TURN:
        output = STRUCTURED_OUTPUT.get(turn.data)
    if output is not None:
        _ask_output(body, generation, output, model)
    if generation:
        body["generationConfig"] = generation
    if prefix_policy is not None:  # before the placeholder: a call left unsigned gets it like any other
        guard_contents(turn, body, origin, policy=prefix_policy, model=model)
    if sign_calls:
        sign_current_turn(body["contents"])
    return body


_GEMINI_VERSION = re.compile(r"gemini-(\d+)(?:\.(\d+))?")


@functools.lru_cache(maxsize=64)
def gemini_version(model: str) -> tuple[int, int]:
    """The model's Gemini version (``gemini-2.5-flash`` -> (2, 5)); a name without one counts as the newest."""
    found = _GEMINI_VERSION.search(model.lower())
    if found is None:
        return (99, 0)
    return (int(found.group(1)), int(found.group(2) or 0))


def _ask_output(body: dict[str, Any], generation: dict[str, Any], output: StructuredOutputConfig, model: str) -> None:
    """``responseMimeType`` and the schema: ``responseJsonSchema`` from Gemini 2.5 on, ``responseSchema`` (the
    OpenAPI subset) before. Gemini before 3 refuses a JSON response together with function calling, so a
    request that offers tools to such a model asks for the JSON in the system instruction instead; the
    answer is validated either way."""
    version = gemini_version(model)
    if "tools" in body and version < (3, 0):
        note = (
            f"When you give your final answer, reply with only a JSON value matching this JSON schema "
            f"(named {output.name}): {dumps(wire_schema(output, 'gemini'))}"
        )
        system = body.setdefault("systemInstruction", {"parts": []})
        system["parts"] = [*system.get("parts", []), {"text": note}]
        return
    generation["responseMimeType"] = "application/json"
    if version >= (2, 5):
        generation["responseJsonSchema"] = wire_schema_encoded(output, "gemini")
    else:
        generation["responseSchema"] = wire_schema_encoded(output, "gemini-openapi")
