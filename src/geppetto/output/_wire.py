"""The schema each provider is sent: the config's JSON schema rewritten per dialect (OpenAI strict mode,
Claude, Gemini's JSON schema subset and its older OpenAPI form), once per schema and dialect."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any, Literal

from .._exceptions import UsageError
from .._json import EncodedJSON
from ._config import StructuredOutputConfig, _remember

_WIRE: OrderedDict[tuple[str, str], Any] = OrderedDict()


Dialect = Literal["openai", "anthropic", "gemini", "gemini-openapi"]

_COMMON = {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf"}
_COMMON |= {"$ref", "$defs", "description", "title"}
_KEEP: dict[str, set[str]] = {
    # OpenAI strict mode: https://platform.openai.com/docs/guides/structured-outputs (supported schemas).
    "openai": _COMMON
    | {"pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
    | {"minItems", "maxItems"},
    # Claude's structured outputs: no numeric or string-length constraints, minItems of 0 or 1 only.
    "anthropic": _COMMON | {"allOf", "format"},
    # Gemini's responseJsonSchema subset.
    "gemini": _COMMON | {"format", "minItems", "maxItems", "minimum", "maximum", "prefixItems", "oneOf"},
}
_HINTED = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength"}
_HINTED |= {"pattern", "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties"}
"""Constraints a provider cannot enforce, kept in the description when removed (the answer is checked anyway)."""
_ANTHROPIC_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
_OPENAI_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}


def wire_schema(config: StructuredOutputConfig, dialect: Dialect) -> dict[str, Any]:
    """The schema as ``dialect``'s provider takes it, worked out once per schema and dialect.

    ``openai``: strict mode's rules when ``config.strict`` (every object closed with
    ``additionalProperties: false``, every property required, optional ones made nullable by the type
    already, keywords strict mode refuses removed); the schema as given otherwise. ``anthropic``: objects
    closed, unsupported keywords removed. ``gemini``: the ``responseJsonSchema`` subset. ``gemini-openapi``:
    the older ``responseSchema`` form (references inlined, ``nullable`` instead of a null type). Keywords
    removed here are still checked when the answer is validated. A mapping with free keys
    (``dict[str, X]``) cannot be closed and is a :class:`~geppetto.UsageError` in strict dialects.
    """
    key = (config.schema_id, f"{dialect}:{config.strict}")
    found: dict[str, Any] | None = _WIRE.get(key)
    if found is not None:
        return found
    if dialect == "openai" and not config.strict:
        out = config.schema
    elif dialect == "gemini-openapi":
        out = _to_openapi(config.schema, config.schema, (), set())
    else:
        out = _rewrite(config.schema, dialect, (), close=dialect != "gemini", all_required=dialect == "openai")
    _remember(_WIRE, key, out)
    return out


def wire_schema_encoded(config: StructuredOutputConfig, dialect: Dialect) -> EncodedJSON:
    """:func:`wire_schema`, encoded once: what the engines put in request bodies, so a schema's JSON text
    is made once per schema and not on every request."""
    key = (config.schema_id, f"{dialect}:{config.strict}:encoded")
    found: EncodedJSON | None = _WIRE.get(key)
    if found is None:
        found = EncodedJSON(wire_schema(config, dialect))
        _remember(_WIRE, key, found)
    return found


def _path(path: tuple[str, ...]) -> str:
    return "/".join(path) or "(root)"


def _rewrite(node: Any, dialect: str, path: tuple[str, ...], *, close: bool, all_required: bool) -> Any:
    if not isinstance(node, dict):
        return node
    keep = _KEEP[dialect]
    node = dict(node)
    if "$ref" in node:  # siblings of a reference are dropped (strict mode wants it alone)
        out_ref: dict[str, Any] = {"$ref": node["$ref"]}
        if "$defs" in node:
            out_ref["$defs"] = _rewrite_map(node["$defs"], dialect, (*path, "$defs"), close, all_required)
        return out_ref
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "allOf" not in keep:
        node.pop("allOf")
        merged = dict(all_of[0]) if isinstance(all_of[0], dict) else {}
        merged.update({k: v for k, v in node.items() if k != "allOf"})
        return _rewrite(merged, dialect, path, close=close, all_required=all_required)
    if "oneOf" in node and "oneOf" not in keep:
        node["anyOf"] = node.pop("oneOf")
    if "const" in node and dialect == "gemini":
        node["enum"] = [node.pop("const")]
    out, dropped = _rewrite_keys(node, dialect, path, close=close, all_required=all_required)
    if dialect == "anthropic" and out.get("minItems") not in (None, 0, 1):
        dropped.append(f"minItems: {out.pop('minItems')}")
    if dropped:  # the provider cannot enforce these; say them, so the model may follow them
        hint = "{" + ", ".join(dropped) + "}"
        out["description"] = f"{out['description']}\n\n{hint}" if out.get("description") else hint
    if close and (out.get("type") == "object" or "properties" in out):
        _close(out, node, path, all_required=all_required)
    return out


def _rewrite_keys(
    node: dict[str, Any], dialect: str, path: tuple[str, ...], *, close: bool, all_required: bool
) -> tuple[dict[str, Any], list[str]]:
    """``node``'s keywords ``dialect`` keeps, each rewritten, and the constraints it dropped (as hints)."""
    keep = _KEEP[dialect]
    out: dict[str, Any] = {}
    dropped: list[str] = []
    for k, v in node.items():
        if k not in keep:
            if k in _HINTED:
                dropped.append(f"{k}: {json.dumps(v)}")
            continue
        if k == "format" and dialect in ("openai", "anthropic"):
            allowed = _OPENAI_FORMATS if dialect == "openai" else _ANTHROPIC_FORMATS
            if v not in allowed:
                dropped.append(f"format: {json.dumps(v)}")
                continue
        if k == "properties" and isinstance(v, dict):
            out[k] = {
                name: _rewrite(sub, dialect, (*path, name), close=close, all_required=all_required)
                for name, sub in v.items()
            }
        elif k == "$defs" and isinstance(v, dict):
            out[k] = _rewrite_map(v, dialect, (*path, "$defs"), close, all_required)
        elif k in ("items", "additionalProperties") and isinstance(v, dict):
            out[k] = _rewrite(v, dialect, (*path, k), close=close, all_required=all_required)
        elif k in ("anyOf", "allOf", "oneOf", "prefixItems") and isinstance(v, list):
            out[k] = [
                _rewrite(sub, dialect, (*path, f"{k}[{i}]"), close=close, all_required=all_required)
                for i, sub in enumerate(v)
            ]
        else:
            out[k] = v
    return out, dropped


def _close(out: dict[str, Any], node: dict[str, Any], path: tuple[str, ...], *, all_required: bool) -> None:
    """Close the object ``out`` (rewritten from ``node``): no other keys, and every property required when
    ``all_required``. Refused for a mapping with free keys."""
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and extra:
        raise UsageError(
            f"structured output: the object at {_path(path)} takes free keys (a dict[str, ...] mapping), "
            "which strict structured output cannot express; use a list of key/value objects, "
            "or output_config(..., strict=False) on OpenAI"
        )
    out["additionalProperties"] = False
    out.setdefault("properties", {})
    if all_required:
        out["required"] = list(out["properties"])


def _rewrite_map(defs: Any, dialect: str, path: tuple[str, ...], close: bool, all_required: bool) -> Any:
    if not isinstance(defs, dict):
        return defs
    return {
        name: _rewrite(sub, dialect, (*path, name), close=close, all_required=all_required)
        for name, sub in defs.items()
    }


_OPENAPI_KEEP = {"type", "format", "description", "nullable", "enum", "properties", "required", "items"}
_OPENAPI_KEEP |= {"minItems", "maxItems", "minimum", "maximum", "anyOf", "title", "propertyOrdering"}


def _to_openapi(node: Any, root: dict[str, Any], path: tuple[str, ...], seen: set[str]) -> Any:
    """``node`` in Gemini's OpenAPI-3.0 Schema subset: references inlined (a recursive schema cannot be),
    ``anyOf`` with a null branch turned into ``nullable``, ``const`` into a one-value enum, types in
    upper case, and property order kept (``propertyOrdering``)."""
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        if ref in seen:
            raise UsageError(
                f"structured output: the schema is recursive at {_path(path)} ({ref}); Gemini's responseSchema "
                "(Gemini 1.x and 2.0 models) cannot express that: use a Gemini 2.5 or later model, or a "
                "schema without recursion"
            )
        target = _resolve(root, ref)
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _to_openapi(merged, root, path, seen | {ref})
    node = dict(node)
    branches = node.pop("anyOf", None) or node.pop("oneOf", None)
    if isinstance(branches, list):
        real = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
        nullable = len(real) < len(branches)
        if len(real) == 1:
            merged = {**real[0], **{k: v for k, v in node.items()}}
            out = _to_openapi(merged, root, path, seen)
        else:
            out = {k: v for k, v in node.items() if k in _OPENAPI_KEEP}
            out["anyOf"] = [_to_openapi(b, root, (*path, f"anyOf[{i}]"), seen) for i, b in enumerate(real)]
        if nullable:
            out["nullable"] = True
        return out
    if "const" in node:
        node["enum"] = [node.pop("const")]
    kind = node.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) < len(kind):
            node["nullable"] = True
        node["type"] = others[0] if others else "string"
    out = {}
    for k, v in node.items():
        if k not in _OPENAPI_KEEP:
            continue
        if k == "type" and isinstance(v, str):
            out[k] = v.upper()
        elif k == "enum" and isinstance(v, list):
            out[k] = [str(x) for x in v]
        elif k == "properties" and isinstance(v, dict):
            out[k] = {name: _to_openapi(sub, root, (*path, name), seen) for name, sub in v.items()}
            out["propertyOrdering"] = list(v)
        elif k == "items":
            out[k] = _to_openapi(v, root, (*path, "items"), seen)
        else:
            out[k] = v
    if "enum" in out:
        out["type"] = "STRING"
    return out


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise UsageError(f"structured output: only local references (#/...) are supported, got {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise UsageError(f"structured output: the reference {ref!r} points at nothing in the schema")
    return node
