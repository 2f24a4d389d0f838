"""The YAML reader and writer turn files use: libyaml's safe classes when PyYAML has them, constructing only
plain values, never aliases, dates as text, and a value no reader can build set aside to be named. Loaded by
the first YAML turn file read or written (``geppetto.turns``' ``dumps_yaml`` and ``loads_yaml``), not by
``import geppetto``."""

from __future__ import annotations

import re
from typing import Any

import yaml

from .._exceptions import TurnFormatError
from ._keys import (
    TOO_MANY_DIGITS,
    Unreadable,
)
from ._model import Turn
from ._serde_doc import _NOT_A_TURN, _TOO_DEEP, _from_doc, _why_unreadable, turn_to_dict
from ._yaml_stream import NotStreamable, stream_yaml

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


# -- turn files (dumps_yaml and loads_yaml of geppetto.turns call these) -----------------------------
def dumps_yaml(turn: Turn) -> str:
    """YAML text ending in the explicit end line ``...``, so a file cut short can be told from a whole one."""
    return yaml.dump(
        turn_to_dict(turn), Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=1 << 30, explicit_end=True
    )


def loads_yaml(text: str | bytes, *, source: str = "<yaml>", strict: bool = True) -> Turn:
    """A Turn from YAML text; raises :class:`TurnFormatError` naming what is wrong and where (by line and
    column, never quoting the text)."""
    try:
        doc, plain = _read_yaml(text)
    except yaml.YAMLError as exc:
        if isinstance(exc, yaml.reader.ReaderError):
            problem = f"not text: {exc.reason} at byte {exc.position}"
            raise TurnFormatError(f"not valid YAML ({problem}); {_NOT_A_TURN}", source=source) from None
        mark = exc.problem_mark if isinstance(exc, yaml.MarkedYAMLError) else None
        raise TurnFormatError(
            f"not valid YAML ({_yaml_problem(exc)}); {_why_unreadable(text, mark.index if mark else None)}",
            source=source,
        ) from None
    except RecursionError:
        raise TurnFormatError(_TOO_DEEP, source=source) from None
    # YAML cut at a line end still parses; a saved turn (it names its format) ends with the line "..."
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if isinstance(doc, dict) and "format" in doc and not raw.rstrip().endswith(b"\n..."):
        raise TurnFormatError(
            "the document does not end with the line '...', so it may have been cut short; "
            "if it is complete, add a line '...' at its end",
            source=source,
        )
    return _from_doc(doc, source=source, strict=strict, plain=plain)


def _read_yaml(text: str | bytes) -> tuple[Any, bool]:
    """The document and whether its values are known to be plain JSON: streamed from libyaml's events
    (see :mod:`._yaml_stream`), or read by the full loader when the text holds what the stream does not
    take (then every value is walked, as before)."""
    try:
        return stream_yaml(text, _PyLoader)
    except NotStreamable:
        return _load_yaml(text), False


def _load_yaml(text: str | bytes) -> Any:
    """The document, read by libyaml when it is there. What libyaml refuses is read again by the pure-Python
    loader, which takes a little more (an escaped lone surrogate, which the JSON check then names with its
    field) and words its errors the same way everywhere. Nodes are checked for aliases only when the text
    holds a ``*``, without which YAML has none."""
    star = ("*" in text) if isinstance(text, str) else (b"*" in text)
    try:
        return _read(_Loader, text, star)
    except yaml.YAMLError:
        if _Loader is _PyLoader:
            raise
        return _read(_PyLoader, text, star)
