"""What a structured-output schema must be before anything uses it: shallow enough for every walk over it,
with references only inside itself (nothing is ever fetched), each pointing at something, and no loop of
references that never goes into the answer (validating against one would never end).

:func:`check_schema` runs when a :class:`~geppetto.StructuredOutputConfig` is made, so a schema that fails
is refused before any request is sent.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from ._exceptions import ConfigurationError
from ._json import json_depth

__all__ = ["MAX_SCHEMA_DEPTH", "check_schema", "schema_too_deep"]

MAX_SCHEMA_DEPTH = 100
"""How deeply a schema may nest JSON objects and arrays (50 levels of properties; providers take 5 to 10).
Every walk over a schema (the wire rewrites, jsonschema's validation) stays well inside the stack."""

_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
_DATA = frozenset({"enum", "const", "default", "examples"})
"""Keywords whose values are answers, not schemas: a ``$ref`` in them is text."""
_SCHEMA_MAPS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
"""Keywords whose values map names to schemas: the names are not keywords."""
_IN_PLACE = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "dependencies"})
"""Keywords that apply their schemas to the same value, not to a part of it."""


def schema_too_deep(depth: int | None) -> ConfigurationError:
    """The error for a schema nested ``depth`` levels deep (``None``: too deep to measure)."""
    nested = f"{depth} levels deep" if depth else "thousands of levels deep"
    return ConfigurationError(
        f"structured output: the schema nests objects and arrays {nested}, past the limit of {MAX_SCHEMA_DEPTH} "
        "(providers take 5 to 10 levels of objects); flatten it, or name repeated parts under $defs"
    )


def check_schema(schema: dict[str, Any], text: str | None) -> None:
    """Raise :class:`~geppetto.ConfigurationError` naming the problem unless ``schema`` is nested at most
    :data:`MAX_SCHEMA_DEPTH` deep (measured on ``text``, its JSON text; ``None`` when that was checked
    already) and its references are local, resolve, and never loop back to a schema without going into a
    property or an item first."""
    depth = json_depth(text) if text is not None else 0
    if depth > MAX_SCHEMA_DEPTH:
        raise schema_too_deep(depth)
    paths: dict[int, str] = {id(schema): "(root)"}
    edges: dict[int, list[tuple[int, str]]] = {}
    nodes: dict[int, Any] = {id(schema): schema}
    pending: list[tuple[Any, str, Any]] = [(schema, "(root)", schema)]
    while pending:
        node, path, base = pending.pop()
        if not isinstance(node, dict):
            continue
        if "$id" in node and node is not schema:
            base = node  # a local reference inside it is resolved against it, as jsonschema does
        out = edges.setdefault(id(node), [])
        for key, value in node.items():
            where = f"{path}/{key}" if path != "(root)" else str(key)
            if key in _REFS and isinstance(value, str):
                target = _target(schema, base, value, path, key)
                out.append((id(target), f"{key} {value!r}"))
                _visit(target, f"{value!r}", base, paths, nodes, pending)
            elif key in _DATA:
                continue
            elif key in _SCHEMA_MAPS and isinstance(value, dict):
                for name, sub in value.items():
                    if key in _IN_PLACE:
                        out.append((id(sub), f"{key}/{name}"))
                    _visit(sub, f"{where}/{name}", base, paths, nodes, pending)
            elif isinstance(value, dict):
                if key in _IN_PLACE:
                    out.append((id(value), str(key)))
                _visit(value, where, base, paths, nodes, pending)
            elif isinstance(value, list):
                for i, sub in enumerate(value):
                    if key in _IN_PLACE:
                        out.append((id(sub), f"{key}[{i}]"))
                    _visit(sub, f"{where}[{i}]", base, paths, nodes, pending)
    _refuse_loops(edges, paths)


def _visit(node: Any, path: str, base: Any, paths: dict[int, str], nodes: dict[int, Any], pending: list[Any]) -> None:
    if isinstance(node, dict | list) and id(node) not in paths:
        paths[id(node)] = path
        nodes[id(node)] = node  # held, so no id is reused while the check runs
        pending.append((node, path, base))


def _target(root: dict[str, Any], base: Any, ref: str, where: str, key: str) -> Any:
    """The schema ``ref`` points at, or a ConfigurationError saying why there is none."""
    if not ref.startswith("#"):
        raise ConfigurationError(
            f"structured output: the {key} {ref!r} at {where} points outside the schema, and geppetto never "
            "fetches schemas (from the network or from files); copy the schema it names under $defs and "
            "refer to it as '#/$defs/Name'"
        )
    fragment = unquote(ref[1:])
    node: Any = base
    if fragment and not fragment.startswith("/"):  # a named anchor
        node = _anchor(root, fragment)
    else:
        for part in fragment.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict):
                node = node.get(part)
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                node = None
    if not isinstance(node, dict | bool):
        raise ConfigurationError(
            f"structured output: the {key} {ref!r} at {where} points at nothing in the schema; "
            "point it at a schema the document holds, such as '#/$defs/Name'"
        )
    return node


def _anchor(root: Any, name: str) -> Any:
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if name in (node.get("$anchor"), node.get("$dynamicAnchor")):
                return node
            stack.extend(v for k, v in node.items() if k not in _DATA)
        elif isinstance(node, list):
            stack.extend(node)
    return None


def _refuse_loops(edges: dict[int, list[tuple[int, str]]], paths: dict[int, str]) -> None:
    """Refuse a loop of references and in-place keywords (``allOf``, ``anyOf``...): following it never goes
    into a part of the answer, so validating would recurse until the stack ran out."""
    state: dict[int, int] = {}  # 1 on the current path, 2 done
    for start in edges:
        if state.get(start):
            continue
        state[start] = 1
        trail: list[tuple[int, str]] = [(start, "")]
        stack = [iter(edges.get(start, ()))]
        while stack:
            step = next(stack[-1], None)
            if step is None:
                stack.pop()
                state[trail.pop()[0]] = 2
                continue
            node, how = step
            if state.get(node) == 1:
                loop = [how for _, how in trail[[n for n, _ in trail].index(node) + 1 :]] + [how]
                raise ConfigurationError(
                    f"structured output: the schema at {paths.get(node, '?')} refers back to itself through "
                    f"{' -> '.join(loop)} without going into a property or an item, so no answer could be "
                    "checked against it; give the loop a property or an item to go through, or remove it"
                )
            if not state.get(node):
                state[node] = 1
                trail.append((node, how))
                stack.append(iter(edges.get(node, ())))
