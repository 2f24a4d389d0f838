"""Gemini request checks: field shapes (proto JSON), roles, non-empty parts, thought signatures."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from ._errors import SimError
from ._shapes import Problem, Shape, array, find_problem, obj, proto_json, scalar
from ._state import SimState

_MISSING_SIGNATURE = (
    "Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
    "correctly, and missing thought_signature may lead to degraded model performance. Additional data, function "
    "call `default_api:{name}` , position {position}. Please refer to "
    "https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
)
PLACEHOLDER_SIGNATURES = frozenset({"skip_thought_signature_validator", "context_engineering_is_the_way_to_go"})
"""Google's documented stand-ins for a function call whose signature is unknown; accepted like real ones."""
_V1BETA = "type.googleapis.com/google.ai.generativelanguage.v1beta."
_STRUCT = scalar("dict", name="type.googleapis.com/google.protobuf.Struct")
_STR, _BYTES, _BOOL = scalar("str", "TYPE_STRING"), scalar("str", "TYPE_BYTES"), scalar("bool", "TYPE_BOOL")
_INT, _FLOAT = scalar("int", "TYPE_INT32"), scalar("num", "TYPE_FLOAT")
_BLOB = obj({"mimeType": _STR, "data": _BYTES}, name=_V1BETA + "Blob")
_ANY = scalar("any")
# The service's own (server-side) tool calls and their results, sent back as it produced them.
_SERVER_TOOL = {"id": _STR, "toolType": _STR, "args": _STRUCT, "response": _STRUCT}
_PART = obj(
    {
        "text": _STR,
        "thought": _BOOL,
        "thoughtSignature": _BYTES,
        "inlineData": _BLOB,
        "fileData": obj({"mimeType": _STR, "fileUri": _STR}, name=_V1BETA + "FileData"),
        "functionCall": obj({"id": _STR, "name": _STR, "args": _STRUCT}, name=_V1BETA + "FunctionCall"),
        "functionResponse": obj({"id": _STR, "name": _STR, "response": _STRUCT}, name=_V1BETA + "FunctionResponse"),
        "executableCode": obj({"language": _STR, "code": _STR, "id": _STR}, name=_V1BETA + "ExecutableCode"),
        "codeExecutionResult": obj({"outcome": _STR, "output": _STR, "id": _STR}, name=_V1BETA + "CodeExecutionResult"),
        "toolCall": obj(_SERVER_TOOL, name=_V1BETA + "ToolCall"),
        "toolResponse": obj(_SERVER_TOOL, name=_V1BETA + "ToolResponse"),
        "videoMetadata": scalar("dict", name=_V1BETA + "VideoMetadata"),
        "mediaResolution": _ANY,
    },
    name=_V1BETA + "Part",
)
_PART_DATA = (
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
    "toolCall",
    "toolResponse",
    # A part may carry only a thought signature (a streamed answer's closing part, sent back as it came).
    "thoughtSignature",
    # Or only the clip settings of the video part beside it (the service reads them, data or not).
    "videoMetadata",
)
_CONTENT = obj({"role": _STR, "parts": array(_PART, name=_V1BETA + "Part")}, name=_V1BETA + "Content")
_DECLARATION = obj(
    {
        "name": _STR,
        "description": _STR,
        "parameters": scalar("dict", name=_V1BETA + "Schema"),
        "parametersJsonSchema": scalar("any"),
    },
    name=_V1BETA + "FunctionDeclaration",
)
_MODE = scalar("str", _V1BETA + "FunctionCallingConfig.Mode", ("MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED"))
_REQUEST = obj(
    {
        "contents": array(_CONTENT, name=_V1BETA + "Content"),
        "systemInstruction": _CONTENT,
        "tools": array(
            obj(
                {
                    "functionDeclarations": array(_DECLARATION, name=_DECLARATION.name),
                    "googleSearch": scalar("dict", name=_V1BETA + "Tool.GoogleSearch"),
                    "codeExecution": scalar("dict", name=_V1BETA + "CodeExecution"),
                    "urlContext": scalar("dict", name=_V1BETA + "UrlContext"),
                    "fileSearch": obj(
                        {"fileSearchStoreNames": array(_STR, name="TYPE_STRING"), "topK": _INT, "metadataFilter": _STR},
                        name=_V1BETA + "FileSearch",
                    ),
                },
                name=_V1BETA + "Tool",
            ),
            name=_V1BETA + "Tool",
        ),
        "toolConfig": obj(
            {
                "functionCallingConfig": obj(
                    {"mode": _MODE, "allowedFunctionNames": array(_STR, name="TYPE_STRING")},
                    name=_V1BETA + "FunctionCallingConfig",
                ),
                "includeServerSideToolInvocations": _BOOL,
            },
            name=_V1BETA + "ToolConfig",
        ),
        "generationConfig": obj(
            {
                "temperature": _FLOAT,
                "topP": _FLOAT,
                "topK": _INT,
                "candidateCount": _INT,
                "maxOutputTokens": _INT,
                "stopSequences": array(_STR, name="TYPE_STRING"),
                "responseMimeType": _STR,
                "responseSchema": scalar("dict", name=_V1BETA + "Schema"),
                "responseJsonSchema": scalar("any"),
                "thinkingConfig": obj(
                    {"includeThoughts": _BOOL, "thinkingBudget": _INT, "thinkingLevel": _STR},
                    name=_V1BETA + "ThinkingConfig",
                ),
                "seed": _INT,
                "responseLogprobs": _BOOL,
                "logprobs": _INT,
                "presencePenalty": _FLOAT,
                "frequencyPenalty": _FLOAT,
                "responseModalities": array(_STR, name="TYPE_STRING"),
                "imageConfig": scalar("dict", name=_V1BETA + "ImageConfig"),
                "mediaResolution": _STR,
            },
            name=_V1BETA + "GenerationConfig",
        ),
        "modelArmorConfig": obj(
            {"promptTemplateName": _STR, "responseTemplateName": _STR}, name=_V1BETA + "ModelArmorConfig"
        ),
        "safetySettings": array(scalar("dict", name=_V1BETA + "SafetySetting"), name=_V1BETA + "SafetySetting"),
        "cachedContent": _STR,
    }
)


def _proto_path(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (("." if out else "") + _snake(part))
    return out


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def _render(problem: Problem) -> SimError:
    """A shape problem in Google's JSON-to-proto wording: `Invalid value at 'tools' (...Tool), 5`."""
    shape: Shape = problem.shape
    if isinstance(problem.value, list) and shape.kind != "list" and problem.path:
        *parent, last = problem.path
        return SimError(
            400,
            f"Invalid JSON payload received. Unknown name \"{last}\" at '{_proto_path(tuple(parent))}': Proto field "
            "is not repeating, cannot start list.",
        )
    value = json.dumps(problem.value, separators=(",", ":"))
    return SimError(400, f"Invalid value at '{_proto_path(problem.path)}' ({shape.name or 'TYPE_STRING'}), {value}")


def check_shape(body: dict[str, Any]) -> dict[str, Any]:
    """The body as the service reads it (snake_case fields camelCased, whole decimals in integer fields made
    integers); raises the service's 400 when a field has the wrong JSON type."""
    body = proto_json(body, _REQUEST)
    problem = find_problem(body, _REQUEST)
    if problem is not None:
        raise _render(problem)
    return body


def check_contents(state: SimState, body: dict[str, Any], reasoning: bool) -> list[dict[str, Any]]:
    """The request's contents after the service's checks (call `check_shape` first); raises its 400.

    Thought signatures must be base64 everywhere (a bytes field), but are validated only in the current turn: the
    model steps after the last user content that is not just function responses. There each signature must be
    one the simulator issued (or one of Google's documented placeholders), and when the model thinks the first
    function call of each model step must carry one.
    """
    contents = body.get("contents")
    if not contents:
        raise SimError(400, "* GenerateContentRequest.contents: contents is not specified")
    start = current_turn_start(contents)
    for position, content in enumerate(contents):
        _check_content(content, position)
        if position >= start and content.get("role") == "model":
            _check_signatures(state, content, position, reasoning)
    return list(contents)


def current_turn_start(contents: list[dict[str, Any]]) -> int:
    """Index of the first content after the last user content with a part that is not a function response."""
    start = 0
    for index, content in enumerate(contents):
        parts = content.get("parts") or []
        if content.get("role") != "model" and any(p.get("functionResponse") is None for p in parts):
            start = index + 1
    return start


def _base64(value: str) -> bool:
    """Whether `value` decodes as base64 the way proto JSON reads bytes (standard or URL-safe, padding optional)."""
    text = value.replace("-", "+").replace("_", "/")
    try:
        base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except ValueError:
        return False
    return True


def _check_content(content: dict[str, Any], position: int) -> None:
    parts = content.get("parts")
    if not parts:
        raise SimError(400, f"* GenerateContentRequest.contents[{position}].parts: contents.parts must not be empty.")
    for index, part in enumerate(parts):
        signature = part.get("thoughtSignature")
        if signature is not None and not _base64(str(signature)):
            raise SimError(
                400,
                f"Invalid value at 'contents[{position}].parts[{index}].thought_signature' (TYPE_BYTES), "
                f'Base64 decoding failed for "{signature}"',
            )
        if not any(part.get(key) is not None for key in _PART_DATA):
            raise SimError(
                400,
                f"* GenerateContentRequest.contents[{position}].parts[{index}].data: required oneof field 'data' must "
                "have one initialized field",
            )
    if (content.get("role") or "user") not in ("user", "model"):
        raise SimError(400, "Please use a valid role: user, model.")


def _check_signatures(state: SimState, content: dict[str, Any], position: int, reasoning: bool) -> None:
    parts = content["parts"]
    for part in parts:
        signature = part.get("thoughtSignature")
        unknown = signature is not None and signature not in PLACEHOLDER_SIGNATURES
        if unknown and state.unseal("gemini", str(signature)) is None:
            raise SimError(400, "Corrupted thought signature.")
    calls = [p for p in parts if p.get("functionCall") is not None]
    if reasoning and calls and calls[0].get("thoughtSignature") is None:
        name = calls[0]["functionCall"].get("name")
        raise SimError(400, _MISSING_SIGNATURE.format(name=name, position=position))
