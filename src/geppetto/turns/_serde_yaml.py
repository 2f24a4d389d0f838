"""The YAML reader and writer turn files use: libyaml's safe classes when PyYAML has them, constructing only
plain values, never aliases, dates as text, and a value no reader can build set aside to be named."""

from __future__ import annotations

import re
from typing import Any

import yaml

from ._keys import (
    TOO_MANY_DIGITS,
    Unreadable,
)

_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe classes when PyYAML was built with it (parsing and emitting in C, about 10 times faster),
else the pure-Python ones; both construct only plain values."""


class _Dumper(_SafeDumper):  # type: ignore[valid-type,misc]
    def ignore_aliases(self, data: Any) -> bool:
        return True  # a value the turn holds twice is written out twice: turn files never use aliases


_BARE_BREAK = re.compile("[\x85\u2028\u2029]")


def _str_presenter(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and _block_safe(value) else None
    if _BARE_BREAK.search(value):
        style = '"'  # PyYAML writes these line breaks bare in quotes and reads a bare NEL back as a space
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _block_safe(value: str) -> bool:
    # literal blocks cannot hold trailing spaces on lines, tabs or other control characters exactly
    return all(c == "\n" or (c.isprintable() and c != "\t") for c in value) and not any(
        line.endswith(" ") for line in value.split("\n")
    )


_Dumper.add_representer(str, _str_presenter)


class _PyLoader(yaml.SafeLoader):
    """The safe loader without aliases: a few nested ``*name`` references expand to billions of values
    (and a self-reference never ends). Turn files written by :func:`dumps_yaml` never use them.

    Dates stay text (JSON has none, and :func:`dumps_yaml` quotes date-like text, so nothing it writes
    changes). A scalar its tag does not fit becomes :class:`Unreadable`, which the JSON check reports with
    the field it sits in.
    """

    check_aliases = True

    def get_single_node(self) -> Any:
        node = yaml.SafeLoader.get_single_node(self)
        return _refuse_aliases(node) if self.check_aliases else node


class _CLoader(_SafeLoader, _PyLoader):  # type: ignore[valid-type,misc]
    """:class:`_PyLoader`'s rules (its resolvers and constructors, found through the MRO) on libyaml's
    parser, when PyYAML has it."""

    def get_single_node(self) -> Any:
        node = _SafeLoader.get_single_node(self)
        return _refuse_aliases(node) if self.check_aliases else node


def _refuse_aliases(root: Any) -> Any:
    """``root``, or a YAML error at the first node reached twice: an alias (``*name``) shares its anchor's node."""
    if root is None:
        return None
    seen: set[int] = set()
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            raise yaml.composer.ComposerError(
                None, None, "turn files do not use YAML aliases (*name); write the value out", node.start_mark
            )
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append(key)
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return root


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    try:
        return loader.construct_yaml_int(node)
    except ValueError:
        if str(node.value).replace("_", "").lstrip("+-").isdigit():
            return Unreadable(node.value, TOO_MANY_DIGITS)
        return _misfit(node)


def _guarded(construct: Any) -> Any:
    def constructor(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
        try:
            return construct(loader, node)
        except (ValueError, KeyError, AttributeError):  # what PyYAML's scalar constructors raise on a misfit
            return _misfit(node)

    return constructor


def _misfit(node: yaml.Node) -> Unreadable:
    tag = str(node.tag).replace("tag:yaml.org,2002:", "!!")
    return Unreadable(str(node.value), f"is {node.value!r} with the tag {tag}, which it does not fit; fix the value")


def _no_timestamp(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Unreadable:
    return Unreadable(str(node.value), "is tagged !!timestamp; a turn holds dates as text, so remove the tag")


# a copy without the timestamp entry: SafeLoader's table is shared with every other safe loader
_PyLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_PyLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_PyLoader.add_constructor("tag:yaml.org,2002:float", _guarded(yaml.SafeLoader.construct_yaml_float))
_PyLoader.add_constructor("tag:yaml.org,2002:bool", _guarded(yaml.SafeLoader.construct_yaml_bool))
_PyLoader.add_constructor("tag:yaml.org,2002:timestamp", _no_timestamp)
_Loader: type[yaml.SafeLoader] = _PyLoader if _SafeLoader is yaml.SafeLoader else _CLoader


def _read(cls: type[yaml.SafeLoader], text: str | bytes, check_aliases: bool) -> Any:
    loader = cls(text)
    loader.check_aliases = check_aliases  # type: ignore[attr-defined]
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """What PyYAML found wrong and where, without the lines of the document it quotes."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return type(exc).__name__
    parts = [p for p in (exc.context, exc.problem) if p]
    mark = exc.problem_mark or exc.context_mark
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return "; ".join(parts) + where if parts else f"{type(exc).__name__}{where}"
