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


def stream_yaml(text: str | bytes, loader_class: type[yaml.SafeLoader]) -> tuple[Any, bool]:
    """The document ``text`` holds, built from libyaml's events, and whether every value in it is plain
    JSON (string keys, finite numbers, nothing unreadable), so the turn reader need not walk the values.
    ``loader_class`` gives the scalar rules. Raises :class:`NotStreamable` (see the module docstring)."""
    try:
        from yaml._yaml import CParser
    except ImportError:
        raise NotStreamable("PyYAML without libyaml") from None
    resolvers: dict[Any, list[tuple[str, Any]]] = loader_class.yaml_implicit_resolvers
    if None in resolvers:  # resolvers for any first character: not the safe loader's rules
        raise NotStreamable("wildcard resolvers")
    constructors = loader_class.yaml_constructors
    loader: list[yaml.SafeLoader] = []  # made for the first scalar that is not text
    scalar_event, mapping_start, sequence_start = (
        events.ScalarEvent,
        events.MappingStartEvent,
        events.SequenceStartEvent,
    )
    ends = (events.MappingEndEvent, events.SequenceEndEvent)
    skip = (events.StreamStartEvent, events.DocumentStartEvent, events.DocumentEndEvent, events.StreamEndEvent)
    plain = True
    root: Any = _NONE
    # The open container, whether it is a mapping, the key awaiting its value (_NONE between entries),
    # and the containers around it, saved the same way.
    container: Any = None
    is_map = False
    key: Any = _NONE
    stack: list[tuple[Any, bool, Any]] = []
    parser = CParser(text)
    get: Any = parser.get_event  # its events' fields (tag, anchor, value, implicit) depend on their class
    try:
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
                            value = _construct(tag, value, constructors, loader, loader_class)
                            if not (value is None or type(value) in (int, bool, str)) and not (
                                type(value) is float and math.isfinite(value)
                            ):
                                plain = False  # NaN, infinity, or a value no reader could build
                            break
                if is_map:
                    if key is _NONE:
                        if type(value) is not str:
                            plain = False
                        key = value
                    else:
                        container[key] = value
                        key = _NONE
                elif container is not None:
                    container.append(value)
                elif root is _NONE:
                    root = value
                else:
                    raise NotStreamable("a second document")
            elif kind is mapping_start or kind is sequence_start:
                if event.anchor is not None or event.tag not in (None, "!"):
                    raise NotStreamable("an anchor or a tag")
                if len(stack) >= MAX_JSON_DEPTH:
                    raise NotStreamable("deep nesting")
                value = {} if kind is mapping_start else []
                if is_map:
                    if key is _NONE:
                        raise NotStreamable("a complex key")
                    container[key] = value
                elif container is not None:
                    container.append(value)
                elif root is _NONE:
                    root = value
                else:
                    raise NotStreamable("a second document")
                stack.append((container, is_map, _NONE))
                container, is_map, key = value, kind is mapping_start, _NONE
            elif kind in ends:
                container, is_map, key = stack.pop()
            elif kind not in skip:  # an alias
                raise NotStreamable("an alias")
    except (yaml.YAMLError, ValueError) as exc:  # what libyaml refuses, text it cannot encode
        raise NotStreamable("libyaml refused it") from exc
    finally:
        parser.dispose()
    return (None if root is _NONE else root), plain


def _construct(tag: str, value: str, constructors: Any, loader: list[Any], loader_class: Any) -> Any:
    """A plain scalar the resolvers gave ``tag``, built by the loader's own constructor for it."""
    if tag not in constructors or tag == "tag:yaml.org,2002:merge":
        raise NotStreamable(tag)
    if not loader:
        loader.append(loader_class(""))
    return constructors[tag](loader[0], yaml.ScalarNode(tag, value))
