"""Reading a YAML turn file as a stream of libyaml's events, without PyYAML's node graph.

PyYAML's safe loader, even over libyaml, builds a node for every value and constructs each through
several Python calls: a 1,000,000-block file took minutes and gigabytes. :func:`stream_yaml` builds the
values straight from the parser's events with one loop and no recursion, resolving plain scalars by the
loader's own rules (its implicit resolvers and constructors, so ``yes``, ``0x1f``, ``.nan`` and dates
read exactly as the loader reads them). What it does not handle (an explicit tag, an anchor or alias, a
merge key, a complex key, several documents, nesting past :data:`MAX_JSON_DEPTH`, anything libyaml
refuses) raises :class:`NotStreamable`, and the caller reads the text with the full loader, whose result
and errors are therefore unchanged.
"""

from __future__ import annotations

import math
from typing import Any

import yaml
from yaml import events

from .._json import MAX_JSON_DEPTH

__all__ = ["NotStreamable", "stream_yaml"]

_STR = "tag:yaml.org,2002:str"
_NONE = object()  # no key read yet


class NotStreamable(Exception):
    """The text holds something only the full loader reads."""


_KINDS = (
    events.ScalarEvent,
    events.MappingStartEvent,
    events.SequenceStartEvent,
    (events.MappingEndEvent, events.SequenceEndEvent),
    (events.StreamStartEvent, events.DocumentStartEvent, events.DocumentEndEvent, events.StreamEndEvent),
)


def stream_yaml(text: str | bytes, loader_class: type[yaml.SafeLoader]) -> tuple[Any, bool]:
    """The document ``text`` holds, built from libyaml's events, and whether every value in it is plain
    JSON (string keys, finite numbers, nothing unreadable), so the turn reader need not walk the values.
    ``loader_class`` gives the scalar rules. Raises :class:`NotStreamable` (see the module docstring)."""
    parser_class, resolvers, constructors = _rules(loader_class)
    parser = parser_class(text)
    try:
        return _build(parser.get_event, resolvers, constructors, loader_class)
    except (yaml.YAMLError, ValueError) as exc:  # what libyaml refuses, text it cannot encode
        raise NotStreamable("libyaml refused it") from exc
    finally:
        parser.dispose()


def _build(get: Any, resolvers: Any, constructors: Any, loader_class: Any) -> tuple[Any, bool]:
    """The document and whether it is plain JSON, from the parser's events (``get`` gives the next; their
    fields, tag, anchor, value and implicit, depend on their class), in one loop without recursion."""
    loader: list[yaml.SafeLoader] = []  # made for the first scalar that is not text
    scalar_event, mapping_start, sequence_start, ends, skip = _KINDS
    plain = True
    root: Any = _NONE
    # The open container, whether it is a mapping, the key awaiting its value (_NONE between entries),
    # and the containers around it, saved the same way.
    container: Any = None
    is_map = False
    key: Any = _NONE
    stack: list[tuple[Any, bool, Any]] = []
    while (event := get()) is not None:
        kind = type(event)
        if kind is scalar_event:
            tag = event.tag
            if event.anchor is not None or (tag is not None and tag != "!"):
                raise NotStreamable("an anchor or a tag")
            value: Any = event.value
            if tag is None and event.implicit[0]:
                for tag, regexp in resolvers.get(value[:1], ()):
                    if regexp.match(value):
                        value, plain = _construct(tag, value, constructors, loader, loader_class, plain)
                        break
            if is_map and key is _NONE:  # a key
                if type(value) is not str:
                    plain = False
                key = value
                continue
        elif kind is mapping_start or kind is sequence_start:
            if event.anchor is not None or event.tag not in (None, "!"):
                raise NotStreamable("an anchor or a tag")
            if len(stack) >= MAX_JSON_DEPTH:
                raise NotStreamable("deep nesting")
            if is_map and key is _NONE:
                raise NotStreamable("a complex key")
            value = {} if kind is mapping_start else []
        elif kind in ends:
            container, is_map, key = stack.pop()
            continue
        elif kind in skip:
            continue
        else:
            raise NotStreamable("an alias")
        if is_map:
            container[key] = value
            key = _NONE
        elif container is not None:
            container.append(value)
        elif root is _NONE:
            root = value
        else:
            raise NotStreamable("a second document")
        if kind is not scalar_event:
            stack.append((container, is_map, key))
            container, is_map, key = value, kind is mapping_start, _NONE
    return (None if root is _NONE else root), plain


def _rules(loader_class: type[yaml.SafeLoader]) -> tuple[Any, dict[Any, list[tuple[str, Any]]], Any]:
    """libyaml's parser class, and the scalar resolvers and constructors of ``loader_class``."""
    try:
        from yaml._yaml import CParser
    except ImportError:
        raise NotStreamable("PyYAML without libyaml") from None
    resolvers: dict[Any, list[tuple[str, Any]]] = loader_class.yaml_implicit_resolvers
    if None in resolvers:  # resolvers for any first character: not the safe loader's rules
        raise NotStreamable("wildcard resolvers")
    return CParser, resolvers, loader_class.yaml_constructors


def _construct(
    tag: str, value: str, constructors: Any, loader: list[Any], loader_class: Any, plain: bool
) -> tuple[Any, bool]:
    """A plain scalar the resolvers gave ``tag``, built by the loader's own constructor for it, and
    ``plain`` unless the value is not plain JSON (NaN, infinity, or a value no reader could build)."""
    if tag not in constructors or tag == "tag:yaml.org,2002:merge":
        raise NotStreamable(tag)
    if not loader:
        loader.append(loader_class(""))
    built = constructors[tag](loader[0], yaml.ScalarNode(tag, value))
    if not (built is None or type(built) in (int, bool, str)) and not (type(built) is float and math.isfinite(built)):
        plain = False
    return built, plain
