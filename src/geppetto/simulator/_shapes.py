"""Request shape checks for the APIs without a bundled schema (Anthropic, Gemini).

A `Shape` describes the JSON a field accepts; `find_problem` walks a value against it and returns the
first `Problem`, which each API renders in its own wording. Unknown fields are accepted and ignored,
as the services do for forward compatibility.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Shape kinds: str, bool, int, num, dict (free-form object), obj (known fields), list, any, union, tagged.
_JSON_KINDS = {"str": str, "dict": dict, "obj": dict, "tagged": dict, "list": list}


@dataclass(frozen=True)
class Shape:
    """The accepted JSON for one field. `name` is the type name an API's wording may need."""

    kind: str
    fields: Mapping[str, Shape] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    item: Shape | None = None
    options: tuple[Shape, ...] = ()
    tag: str = ""
    tags: Mapping[str, Shape] = field(default_factory=dict)
    enum: tuple[str, ...] = ()
    name: str = ""


def obj(fields: Mapping[str, Shape], *required: str, name: str = "") -> Shape:
    """An object with known `fields` (others ignored), of which `required` must be present."""
    return Shape("obj", fields=fields, required=required, name=name)


def array(item: Shape, name: str = "") -> Shape:
    """A JSON array whose items match `item`."""
    return Shape("list", item=item, name=name)


def one_of(*options: Shape) -> Shape:
    """A value matching whichever option has its JSON type (e.g. a string or a list of blocks)."""
    return Shape("union", options=options)


def tagged(tag: str, tags: Mapping[str, Shape]) -> Shape:
    """An object discriminated by the string field `tag`, whose value selects the shape."""
    return Shape("tagged", tag=tag, tags=tags)


def scalar(kind: str, name: str = "", enum: tuple[str, ...] = ()) -> Shape:
    """A scalar: "str", "bool", "int", "num", "dict" (any object) or "any"; `enum` limits strings."""
    return Shape(kind, name=name, enum=enum)


@dataclass(frozen=True)
class Problem:
    """Why a value does not fit: `what` is type, missing, enum, tag_missing or tag_unknown."""

    what: str
    path: tuple[str | int, ...]
    shape: Shape
    value: Any = None


def fits(value: Any, kind: str) -> bool:
    """True when `value` has the JSON type of shape kind `kind` (booleans are not numbers)."""
    if kind == "any":
        return True
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "num":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "union":
        return False
    return isinstance(value, _JSON_KINDS[kind])


def find_problem(value: Any, shape: Shape, path: tuple[str | int, ...] = ()) -> Problem | None:
    """The first place where `value` does not fit `shape`, or None."""
    if shape.kind == "union":
        option = next((o for o in shape.options if fits(value, o.kind)), None)
        return Problem("type", path, shape, value) if option is None else find_problem(value, option, path)
    if not fits(value, shape.kind):
        return Problem("type", path, shape, value)
    if shape.enum and value not in shape.enum:
        return Problem("enum", path, shape, value)
    if shape.kind == "list" and shape.item is not None:
        for index, item in enumerate(value):
            problem = find_problem(item, shape.item, (*path, index))
            if problem is not None:
                return problem
    if shape.kind == "tagged":
        return _find_tagged(value, shape, path)
    if shape.kind == "obj":
        return _find_fields(value, shape, path)
    return None


def _find_tagged(value: dict[str, Any], shape: Shape, path: tuple[str | int, ...]) -> Problem | None:
    tag = value.get(shape.tag)
    if not isinstance(tag, str):
        return Problem("tag_missing", path, shape, value)
    chosen = shape.tags.get(tag)
    if chosen is None:
        return Problem("tag_unknown", path, shape, tag)
    return _find_fields(value, chosen, (*path, tag))


def _find_fields(value: dict[str, Any], shape: Shape, path: tuple[str | int, ...]) -> Problem | None:
    for name in shape.required:
        if name not in value:
            return Problem("missing", (*path, name), shape.fields.get(name, shape), None)
    for name, inner in shape.fields.items():
        if name not in value or (value[name] is None and name not in shape.required):
            continue  # optional fields may be null
        problem = find_problem(value[name], inner, (*path, name))
        if problem is not None:
            return problem
    return None


def proto_json(value: Any, shape: Shape) -> Any:
    """`value` as a proto3 JSON parser reads it against `shape`: a field may be spelled as in the proto
    (`file_uri`) or in lowerCamelCase (`fileUri`), and an integer field takes a whole decimal (`40.0`).
    Known fields come back camelCased and whole decimals as integers; free-form values (`dict`, `any`)
    are left exactly as they are."""
    if shape.kind == "int" and isinstance(value, float) and value.is_integer():
        return int(value)
    if shape.kind == "union":
        option = next((o for o in shape.options if fits(value, o.kind)), None)
        return value if option is None else proto_json(value, option)
    if shape.kind == "list" and shape.item is not None and isinstance(value, list):
        return [proto_json(item, shape.item) for item in value]
    if shape.kind == "tagged" and isinstance(value, dict):
        chosen = shape.tags.get(str(value.get(shape.tag)))
        return value if chosen is None else proto_json(value, chosen)
    if shape.kind == "obj" and isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            camel = _camel(key)
            name = camel if camel in shape.fields and camel not in value else key
            inner = shape.fields.get(name)
            out[name] = item if inner is None else proto_json(item, inner)
        return out
    return value


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)
