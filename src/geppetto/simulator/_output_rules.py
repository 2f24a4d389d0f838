"""What each simulated API refuses in a structured-output request, as the real services refuse it.

OpenAI strict mode (Responses ``text.format`` and Chat ``response_format``): the root must be an object,
every object must say ``additionalProperties: false`` and list every property in ``required``; the name
is 1-64 of a-z A-Z 0-9 _ -. Claude ``output_config.format``: objects must not allow additional
properties, and numeric and string-length constraints are not supported. Gemini: a schema needs
``responseMimeType: application/json``, ``responseSchema`` and ``responseJsonSchema`` exclude each
other, and models before Gemini 3 refuse a JSON response together with function calling.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ._errors import SimError

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ANTHROPIC_UNSUPPORTED = (
    *("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    *("minLength", "maxLength", "pattern"),
)


def _subschemas(node: Any, context: tuple[str, ...]) -> Iterator[tuple[dict[str, Any], tuple[str, ...]]]:
    """Every schema object in ``node`` with its context path (as OpenAI's messages write it)."""
    if not isinstance(node, dict):
        return
    yield node, context
    for key in ("properties", "$defs", "definitions"):
        inner = node.get(key)
        if isinstance(inner, dict):
            for name, sub in inner.items():
                yield from _subschemas(sub, (*context, key, name))
    for key in ("items", "additionalProperties", "not"):
        if isinstance(node.get(key), dict):
            yield from _subschemas(node[key], (*context, key))
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        inner = node.get(key)
        if isinstance(inner, list):
            for i, sub in enumerate(inner):
                yield from _subschemas(sub, (*context, key, str(i)))


def _ctx(context: tuple[str, ...]) -> str:
    return "(" + ", ".join(repr(c) for c in context) + ("," if len(context) == 1 else "") + ")"


def check_openai_format(fmt: dict[str, Any], param: str) -> None:
    """Refuse a ``json_schema`` format the OpenAI APIs refuse (``param`` names where it sits)."""
    name = fmt.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise SimError(
            400,
            f"Invalid '{param}.name': string does not match pattern. Expected a string that matches the "
            "pattern '^[a-zA-Z0-9_-]+$'.",
            param=f"{param}.name",
            code="invalid_value",
        )
    schema = fmt.get("schema")
    if not fmt.get("strict") or not isinstance(schema, dict):
        return
    prefix = f"Invalid schema for response_format '{name}'"
    if schema.get("type") != "object":
        raise SimError(
            400,
            f"{prefix}: schema must be a JSON Schema of 'type: \"object\"', got 'type: \"{schema.get('type')}\"'.",
            param=f"{param}.schema",
            code="invalid_json_schema",
        )
    for node, context in _subschemas(schema, ()):
        if node.get("type") != "object" and "properties" not in node:
            continue
        if node.get("additionalProperties") is not False:
            raise SimError(
                400,
                f"{prefix}: In context={_ctx(context)}, 'additionalProperties' is required to be supplied and "
                "to be false.",
                param=f"{param}.schema",
                code="invalid_json_schema",
            )
        props = node.get("properties") or {}
        listed = node.get("required")
        required: list[Any] = listed if isinstance(listed, list) else []
        missing = [p for p in props if p not in required]
        if missing:
            raise SimError(
                400,
                f"{prefix}: In context={_ctx(context)}, 'required' is required to be supplied and to be an array "
                f"including every key in properties. Missing '{missing[0]}'.",
                param=f"{param}.schema",
                code="invalid_json_schema",
            )


def check_anthropic_format(body: dict[str, Any]) -> dict[str, Any] | None:
    """The schema of ``output_config.format``, after refusing what Claude refuses; ``None`` without one."""
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, dict) else None
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
        raise SimError(400, 'output_config.format: expected {"type": "json_schema", "schema": {...}}')
    schema: dict[str, Any] = fmt["schema"]
    for node, context in _subschemas(schema, ()):
        where = "/".join(context) or "(root)"
        is_object = node.get("type") == "object" or "properties" in node
        if is_object and node.get("additionalProperties") is not False:
            raise SimError(
                400,
                f"output_config.format.schema: For 'object' type, 'additionalProperties' must be explicitly set "
                f"to false (at {where})",
            )
        for keyword in _ANTHROPIC_UNSUPPORTED:
            if keyword in node:
                raise SimError(
                    400, f"output_config.format.schema: '{keyword}' is not supported in structured outputs (at {where})"
                )
    return schema


def check_gemini_output(body: dict[str, Any], model: str) -> None:
    """Refuse the structured-output settings Gemini refuses for ``model``."""
    config = body.get("generationConfig")
    if not isinstance(config, dict):
        return
    has_json, has_openapi = "responseJsonSchema" in config, "responseSchema" in config
    mime = config.get("responseMimeType")
    if has_json and has_openapi:
        raise SimError(400, "responseSchema and responseJsonSchema cannot both be set; use one of them.")
    if (has_json or has_openapi) and mime not in ("application/json", "text/x.enum"):
        raise SimError(
            400,
            "response_mime_type must be one of the following: application/json, text/x.enum when response_schema "
            "is set.",
        )
    found = re.search(r"gemini-(\d+)", model)
    if mime == "application/json" and body.get("tools") and found is not None and int(found.group(1)) < 3:
        raise SimError(400, "Function calling with a response mime type: 'application/json' is unsupported")
