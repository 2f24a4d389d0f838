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


def _show(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else json.dumps(value)


def _listing(values: list[Any]) -> str:
    shown = [_show(v) for v in values]
    if len(shown) <= 2:
        return " and ".join(shown)
    return ", ".join(shown[:-1]) + ", and " + shown[-1]


def enum_error(instance: Any, values: list[Any], path: str) -> SimError:
    """A value outside its accepted set, in the service's wording."""
    return SimError(
        400,
        f"Invalid value: {_show(instance)}. Supported values are: {_listing(values)}.",
        param=path or None,
        code="invalid_value",
    )


def bound_error(path: str, value: float, limit: Any, sign: str, *, decimal: bool = False) -> SimError:
    """A number outside its bounds (`sign` is the accepted relation: <=, <, >=, >), in the service's wording:
    a decimal field (`decimal`, e.g. `temperature`) is "decimal" whatever the value, as the service says."""
    noun = "integer" if isinstance(value, int) and not decimal else "decimal"
    above = sign.startswith("<")
    return SimError(
        400,
        f"Invalid '{path}': {noun} {'above maximum' if above else 'below minimum'} value. Expected a value "
        f"{sign} {limit}, but got {value} instead.",
        param=path or None,
        code=f"{noun}_{'above_max' if above else 'below_min'}_value",
    )


def _length_error(err: ValidationError, path: str) -> SimError:
    noun = "string" if isinstance(err.instance, str) else "array"
    too_long = err.validator in ("maxLength", "maxItems")
    article = "an" if noun == "array" else "a"
    got = f"an empty {noun}" if not err.instance else f"{article} {noun} with length {len(err.instance)}"
    return SimError(
        400,
        f"Invalid '{path}': {noun} too {'long' if too_long else 'short'}. Expected {article} "
        f"{noun} with {'maximum' if too_long else 'minimum'} length {err.validator_value}, but got {got} instead.",
        param=path or None,
        code=f"{noun}_{'above_max' if too_long else 'below_min'}_length",
    )


def _to_error(err: ValidationError) -> SimError:
    """One schema violation in the service's wording (OpenAI's ``Invalid '<path>': ...`` form), never a Python repr."""
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
    if err.validator in ("enum", "const"):
        values = list(err.validator_value) if err.validator == "enum" else [err.validator_value]
        return enum_error(err.instance, values, path)
    signs = {"maximum": "<=", "exclusiveMaximum": "<", "minimum": ">=", "exclusiveMinimum": ">"}
    if err.validator in signs:
        decimal = isinstance(err.schema, dict) and err.schema.get("type") == "number"
        return bound_error(path, err.instance, err.validator_value, signs[str(err.validator)], decimal=decimal)
    if err.validator in ("maxLength", "minLength", "maxItems", "minItems"):
        return _length_error(err, path)
    if err.validator == "pattern":
        message = f"Invalid '{path}': string does not match pattern. Expected a string that matches the pattern "
        return SimError(400, f"{message}'{err.validator_value}'.", param=path or None, code="invalid_value")
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        known = err.schema.get("properties", {}) if isinstance(err.schema, dict) else {}
        extra = next((k for k in err.instance if k not in known), "")
        full = f"{path}.{extra}" if path else str(extra)
        return SimError(400, f"Unknown parameter: '{full}'.", param=full, code="unknown_parameter")
    return SimError(400, f"Invalid value for '{path}'.", param=path or None, code="invalid_value")


_DISCRIMINATORS = ("type", "role")


def _fails_on(err: ValidationError, key: str) -> bool:
    """The alternative rejects the discriminating field `key`: a different value, or `key` required but missing."""
    if list(err.relative_path) == [key]:
        return True
    return (
        not err.relative_path
        and err.validator == "required"
        and isinstance(err.instance, dict)
        and key not in err.instance
        and key in err.validator_value
    )


def _groups(err: ValidationError) -> list[list[ValidationError]]:
    """An anyOf error's sub-errors grouped by the alternative they belong to."""
    branches: dict[Any, list[ValidationError]] = {}
    for sub in err.context or []:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    return list(branches.values())


def _type_mismatch(err: ValidationError) -> bool:
    """The alternative does not apply: a discriminating field (`type`, `role`) or the JSON type differs
    (for a nested anyOf: in every one of its alternatives)."""
    if any(_fails_on(err, key) for key in _DISCRIMINATORS):
        return True
    if not err.relative_path and err.validator in ("anyOf", "oneOf") and err.context:
        return all(any(_type_mismatch(e) for e in g) for g in _groups(err))
    return not err.relative_path and err.validator == "type"


def _values_error(found: list[ValidationError]) -> SimError | None:
    """One enum error listing every value the alternatives in `found` accept."""
    found = [e for e in found if e.validator in ("enum", "const")]
    values: list[Any] = []
    for e in found:
        accepted = e.validator_value if e.validator == "enum" else [e.validator_value]
        values += [v for v in accepted if v not in values]
    return enum_error(found[0].instance, values, json_path(found[0].absolute_path)) if found else None


def _merged_enum(groups: list[list[ValidationError]]) -> SimError | None:
    """When every alternative rejects the same discriminating value, one error listing all accepted values."""
    groups = [g for g in groups if not any(not e.relative_path and e.validator == "type" for e in g)]
    for key in _DISCRIMINATORS:
        failing = [[e for e in g if _fails_on(e, key)] for g in groups]
        if groups and all(failing):
            return _values_error([e for f in failing for e in f])
        groups = [g for g, f in zip(groups, failing, strict=True) if not f]
    return None


def _rejected_value(instance: Any, groups: list[list[ValidationError]], matching: list[list[ValidationError]]) -> Any:
    """A discriminating value (e.g. `role: "bot"`) that only alternatives without that field let through."""
    if not isinstance(instance, dict) or not all(
        all(not e.relative_path and e.validator == "required" for e in g) for g in matching
    ):
        return None
    for key in _DISCRIMINATORS:
        defined = any(
            isinstance(e.schema, dict) and key in (e.schema.get("properties") or {}) for g in matching for e in g
        )
        if isinstance(instance.get(key), str) and not defined:
            merged = _values_error([e for g in groups for e in g if list(e.relative_path) == [key]])
            if merged is not None:
                return merged
    return None


def _branch(err: ValidationError) -> ValidationError | SimError:
    """Descend through anyOf: prefer the alternative whose `type`/`role` matches the instance (discriminator-like)."""
    while err.validator in ("anyOf", "oneOf") and err.context:
        groups = _groups(err)
        if all(len(g) == 1 and g[0].validator == "type" and not g[0].relative_path for g in groups):
            return err
        matching = [g for g in groups if not any(_type_mismatch(e) for e in g)]
        merged = _rejected_value(err.instance, groups, matching) if matching else _merged_enum(groups)
        if merged is not None:
            return merged
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
        if isinstance(picked, SimError):
            raise picked
        raise _any_type_error(picked) or _to_error(picked)
