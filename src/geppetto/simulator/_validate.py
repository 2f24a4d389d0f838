"""OpenAI request validation against the bundled OpenAPI schemas (oneOf already rewritten to anyOf)."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, relevance
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from ._errors import SimError

_URN = "urn:openai"
_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a decimal",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
}


@functools.cache
def _registry() -> Registry:
    raw = resources.files("geppetto.simulator").joinpath("openapi/openai-requests.json").read_text()
    registry: Registry = Registry().with_resource(
        _URN, Resource.from_contents(json.loads(raw), default_specification=DRAFT202012)
    )
    return registry


@functools.cache
def validator(schema_name: str) -> Draft202012Validator:
    """The (cached, built once) validator for a bundled component schema, e.g. "CreateResponse"."""
    return Draft202012Validator({"$ref": f"{_URN}#/components/schemas/{schema_name}"}, registry=_registry())


def json_path(parts: Any) -> str:
    """A jsonschema path as OpenAI writes params: `input[0].content`."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a decimal"
    return {str: "a string", list: "an array", dict: "an object", type(None): "null"}.get(type(value), "a value")


def _to_error(err: ValidationError) -> SimError:
    path = json_path(err.absolute_path)
    if err.validator == "required":
        missing = next((p for p in err.validator_value if isinstance(err.instance, dict) and p not in err.instance), "")
        full = f"{path}.{missing}" if path else str(missing)
        return SimError(400, f"Missing required parameter: '{full}'.", param=full, code="missing_required_parameter")
    if err.validator == "type":
        expected = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
        words = " or ".join(_TYPE_WORDS.get(str(t), str(t)) for t in expected)
        return SimError(
            400,
            f"Invalid type for '{path}': expected {words}, but got {_kind(err.instance)} instead.",
            param=path or None,
            code="invalid_type",
        )
    return SimError(400, f"Invalid value for '{path}': {err.message}", param=path or None, code="invalid_value")


def _type_mismatch(err: ValidationError) -> bool:
    """The alternative does not apply: its discriminating `type` differs, is missing, or the JSON type differs."""
    if list(err.relative_path) == ["type"]:
        return True
    if err.relative_path:
        return False
    if err.validator == "type":
        return True
    return (
        err.validator == "required"
        and isinstance(err.instance, dict)
        and "type" not in err.instance
        and "type" in err.validator_value
    )


def _branch(err: ValidationError) -> ValidationError:
    """Descend through anyOf: prefer the alternative whose `type` matches the instance (discriminator-like)."""
    while err.validator in ("anyOf", "oneOf") and err.context:
        branches: dict[Any, list[ValidationError]] = {}
        for sub in err.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        groups = list(branches.values())
        if all(len(g) == 1 and g[0].validator == "type" and not g[0].relative_path for g in groups):
            return err
        matching = [g for g in groups if not any(_type_mismatch(e) for e in g)]
        candidates = [e for g in matching or groups for e in g]
        err = max(candidates, key=lambda e: (len(e.absolute_path), relevance(e)))
    return err


def _any_type_error(err: ValidationError) -> SimError | None:
    if err.validator not in ("anyOf", "oneOf") or not err.context:
        return None
    expected: list[str] = []
    for sub in err.context:
        if sub.validator != "type" or sub.relative_path:
            return None
        values = sub.validator_value if isinstance(sub.validator_value, list) else [sub.validator_value]
        expected += [str(v) for v in values if str(v) not in expected]
    path = json_path(err.absolute_path)
    words = " or ".join(_TYPE_WORDS.get(t, t) for t in expected)
    return SimError(
        400,
        f"Invalid type for '{path}': expected {words}, but got {_kind(err.instance)} instead.",
        param=path or None,
        code="invalid_type",
    )


def validate(schema_name: str, body: Any) -> None:
    """Raise SimError(400) with the JSON path as `param` when `body` does not match the schema."""
    errors = list(validator(schema_name).iter_errors(body))
    if errors:
        error = max(errors, key=relevance)
        picked = _branch(error)
        raise _any_type_error(picked) or _to_error(picked)
