"""Typed keys for turn metadata, turn data and block metadata.

A key has a string form ``namespace.name@vN`` (``geppetto.inference_id@v1``) and a value type. The
maps it reads and writes hold plain JSON values only, so a Turn always serializes exactly; a key whose
type is a structured class (a dataclass with ``to_dict``/``from_dict``) converts on the way in and out.

``key.get(m)`` returns ``None`` (or a default) when the key is missing and raises
:class:`MetadataTypeError` when the stored value has the wrong type; ``key.set(m, v)`` refuses a value
of the wrong type or one that would not survive a JSON round trip, and stores a copy.

Types are checked all the way down for what JSON can hold: ``list[X]``, ``dict[str, X]``, unions
(``str | None``), ``Literal[...]`` and ``Any``, nested as deep as the value goes, so ``[1]`` under a
``Key[list[str]]`` is a wrong type, not a list. Any other parameterized type is checked by its outer
class only.
"""

from __future__ import annotations

import copy
import enum
import math
import re
import sys
import types
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar, Union, cast, get_args, get_origin, overload

from .._exceptions import KeyFormatError, MetadataTypeError, UsageError

__all__ = [
    "BlockMetadata",
    "JSONCodec",
    "Key",
    "KeyFamily",
    "TurnData",
    "TurnMetadata",
    "Unreadable",
    "block_meta_key",
    "check_json_value",
    "copy_json",
    "parse_key",
    "turn_data_key",
    "turn_meta_key",
]

T = TypeVar("T")
D = TypeVar("D")

_SEGMENT = r"[a-z][a-z0-9_]*"
_KEY_RE = re.compile(rf"^(?P<ns>{_SEGMENT}(?:\.{_SEGMENT})*)\.(?P<name>{_SEGMENT})@v(?P<ver>[1-9][0-9]*)$")


MAX_INT_DIGITS = sys.int_info.default_max_str_digits
"""Python reads and writes integers of at most this many digits as text (4,300) unless told otherwise."""
_INT_LIMIT = 10**MAX_INT_DIGITS
TOO_MANY_DIGITS = (
    f"is an integer of more than {MAX_INT_DIGITS:,} digits, which Python does not read or write as text; "
    "store it as a string"
)


class Unreadable:
    """Stands in for a value a turn file holds but no reader could build (an integer of too many digits,
    a YAML value its tag does not fit), so the JSON check can name the field it was found in."""

    __slots__ = ("problem", "text")

    def __init__(self, text: str, problem: str) -> None:
        self.text = text
        self.problem = problem

    def __repr__(self) -> str:
        return repr(self.text if len(self.text) <= 40 else self.text[:37] + "...")


TOO_DEEP = "is nested too deeply; a turn nests lists and mappings a few hundred levels at most"
"""The limit on nesting, for every walk over a turn's values (copying, checking, reading a file): Python's
stack, which a walk deeper than a few hundred levels exhausts. Deeper is refused, naming the value."""


def copy_json(value: Any) -> Any:
    """Deep-copy a JSON-shaped value quickly (dicts and lists are copied, scalars shared). A value nested
    past :data:`TOO_DEEP`'s limit is a :class:`MetadataTypeError`."""
    try:
        return _copy(value)
    except RecursionError:
        raise MetadataTypeError(f"a value {TOO_DEEP}; flatten it (it cannot be copied)") from None


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _copy(value: Any) -> Any:
    if type(value) is dict:  # scalars are shared without a call each (most values of a block are)
        return {k: v if type(v) in _PLAIN else _copy(v) for k, v in value.items()}
    if type(value) is list:
        return [v if type(v) in _PLAIN else _copy(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, dict):  # a watched payload's dicts and lists copy as plain ones
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return copy.deepcopy(value)


class _NotPlain(Exception):
    """A value :func:`_checked_copy` leaves to the full check (and its message)."""


def _checked_copy(value: Any) -> Any:
    """A copy of ``value`` made in the same walk that checks it is plain JSON (what ``check_json_value``
    then ``copy_json`` do in two); :class:`_NotPlain` at anything it does not pass at a glance."""
    t = type(value)
    if t is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise _NotPlain
            tv = type(v)
            # the common scalars inline; the rest (and every doubt) through _checked_item
            if (tv is str and v.isascii()) or v is None or tv is bool or (tv is int and v.bit_length() <= 14_000):
                out[k] = v
            else:
                out[k] = _checked_item(v)
        return out
    if t is list:
        return [_checked_item(v) for v in value]
    return _checked_item(value)


def _checked_item(v: Any) -> Any:
    t = type(v)
    if t is str:
        # only a string with a non-ASCII character can hold a lone surrogate, which UTF-8 cannot encode
        if not v.isascii():
            v.encode("utf-8")
        return v
    if t is int:
        if v.bit_length() > 14_000:  # maybe past Python's 4,300 digits: the full check decides
            raise _NotPlain
        return v
    if v is None or t is bool:
        return v
    if t is float:
        if not math.isfinite(v):
            raise _NotPlain
        return v
    if t is dict or t is list:
        return _checked_copy(v)
    raise _NotPlain


class KeyFamily(enum.Enum):
    """Which map a key belongs to."""

    TURN_METADATA = "turn metadata"
    TURN_DATA = "turn data"
    BLOCK_METADATA = "block metadata"


class _FamilyMap(dict[str, Any]):
    """A plain dict of JSON values that knows which key family it holds."""

    __slots__ = ()
    family: ClassVar[KeyFamily]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict.__repr__(self)})"


class TurnMetadata(_FamilyMap):
    """Turn-level metadata: correlation ids, usage, provider facts."""

    __slots__ = ()

    family = KeyFamily.TURN_METADATA


class TurnData(_FamilyMap):
    """Turn-level data: configuration that travels with the turn (tool config, conversation state)."""

    __slots__ = ()

    family = KeyFamily.TURN_DATA


class BlockMetadata(_FamilyMap):
    """Block-level metadata: provenance stamps (inference id, response id, middleware)."""

    __slots__ = ("_seal",)  # set once the block is sealed (see _watch)

    family = KeyFamily.BLOCK_METADATA


class JSONCodec(Protocol):
    """A structured value type a key can hold: it converts itself to and from plain JSON."""

    def to_dict(self) -> dict[str, Any]: ...

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any: ...


_PARSED: dict[str, tuple[str, str, int]] = {}
"""Keys already parsed (a loaded Turn names the same few keys on each of its blocks), up to :data:`_PARSED_MAX`."""
_PARSED_MAX = 4096


def parse_key(text: str) -> tuple[str, str, int]:
    """Split ``namespace.name@vN`` into its parts, or raise :class:`KeyFormatError` naming the fix."""
    parsed = _PARSED.get(text) if type(text) is str else None
    if parsed is not None:
        return parsed
    m = _KEY_RE.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise KeyFormatError(
            f"{text!r} is not a key: write it as 'namespace.name@vN' in lower case, for example 'myapp.user_tier@v1'"
        )
    parsed = m["ns"], m["name"], int(m["ver"])
    if type(text) is str and len(_PARSED) < _PARSED_MAX:
        _PARSED[text] = parsed
    return parsed


def check_json_value(value: Any, *, what: str = "value") -> None:
    """Raise :class:`MetadataTypeError` unless ``value`` survives a JSON round trip unchanged.

    Plain JSON means: None, bool, int (of at most 4,300 digits), finite float, str (encodable as UTF-8),
    and lists and dicts with string keys of those, nested no deeper than :data:`TOO_DEEP` says. Tuples,
    sets, bytes, NaN and objects are refused.
    """
    try:
        problem = _json_problem(value, what)
    except RecursionError:
        problem = f"{what} {TOO_DEEP}"
    if problem:
        raise MetadataTypeError(problem)


def _json_problem(value: Any, path: str) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        # comparing sizes is cheap; only integers of thousands of digits reach the second test
        return f"{path} {TOO_MANY_DIGITS}" if value.bit_length() > 14_000 and abs(value) >= _INT_LIMIT else None
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return f"{path} is {value!r}, which JSON cannot hold; store a finite number or a string"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{path} holds a lone surrogate character, which no UTF-8 file can hold"
        return None
    if isinstance(value, list):
        for i, item in enumerate(value):
            p = _json_problem(item, f"{path}[{i}]")
            if p:
                return p
        return None
    if isinstance(value, dict):
        for k, item in value.items():
            if isinstance(k, Unreadable):
                return f"{path} has a key that {k.problem}"
            if not isinstance(k, str):
                return f"{path} has the non-string key {k!r}; JSON objects only have string keys"
            p = _json_problem(item, f"{path}[{k!r}]")
            if p:
                return p
        return None
    if isinstance(value, Unreadable):
        return f"{path} {value.problem}"
    kind = type(value).__name__
    hint = "a list" if isinstance(value, tuple | set | frozenset) else "plain JSON (dict, list, str, number)"
    return f"{path} is a {kind}, which does not survive a JSON round trip; convert it to {hint}"


class Key(Generic[T]):
    """A typed key of one family. Build keys with :func:`turn_meta_key`, :func:`turn_data_key` or
    :func:`block_meta_key`; compare and hash by string form."""

    __slots__ = ("_codec", "_exact", "_text", "family", "name", "namespace", "type", "version")

    def __init__(self, family: KeyFamily, namespace: str, name: str, version: int, type_: type[T]) -> None:
        text = f"{namespace}.{name}@v{version}"
        parse_key(text)
        self.family = family
        self.namespace = namespace
        self.name = name
        self.version = version
        self.type = type_
        # Fixed for the key's life, so worked out once: the map key, whether the type is a JSONCodec, and
        # the type itself when a value of exactly that type needs no further type check.
        self._text = text
        self._codec = _is_codec(type_)
        self._exact: type | None = type_ if type_ in (str, int, float, bool, dict, list) else None

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Key({self.family.value}, {str(self)!r}, {_type_name(self.type)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Key) and other._text == self._text and other.family is self.family

    def __hash__(self) -> int:
        return hash((self._text, self.family))

    def _check_family(self, m: dict[str, Any]) -> None:
        fam = getattr(m, "family", None)
        if fam is not None and fam is not self.family:
            raise UsageError(f"{self} is a {self.family.value} key; it was used on {fam.value}")

    @overload
    def get(self, m: dict[str, Any]) -> T | None: ...
    @overload
    def get(self, m: dict[str, Any], default: D) -> T | D: ...

    def get(self, m: dict[str, Any], default: Any = None) -> Any:
        """The value under this key, ``default`` when missing; :class:`MetadataTypeError` when the
        stored value is not of the key's type."""
        fam = getattr(m, "family", None)  # _check_family inline: every request reads and writes dozens of keys
        if fam is not None and fam is not self.family:
            self._check_family(m)
        if self._text not in m:
            return default
        return self._decode(m[self._text])

    def require(self, m: dict[str, Any]) -> T:
        """The value under this key; :class:`KeyError` naming the key when it is missing."""
        self._check_family(m)
        s = self._text
        if s not in m:
            raise KeyError(f"{s} is not set")
        value: T = self._decode(m[s])
        return value

    def set(self, m: dict[str, Any], value: T) -> None:
        """Store a copy of ``value``; refuses values of the wrong type or that are not plain JSON.

        The copy means editing ``value`` afterwards does not change the map. ``get`` returns the stored
        value itself, so editing what ``get`` returned does (as with any dict).
        """
        fam = getattr(m, "family", None)
        if fam is not None and fam is not self.family:
            self._check_family(m)
        raw = self._encode(value)
        try:
            m[self._text] = _checked_copy(raw)
        except (_NotPlain, RecursionError, UnicodeEncodeError):
            # the slow path names the field that does not fit (or copies a value of dict and list subclasses)
            check_json_value(raw, what=self._text)
            m[self._text] = copy_json(raw)

    def delete(self, m: dict[str, Any]) -> None:
        """Remove the key if present."""
        self._check_family(m)
        m.pop(self._text, None)

    def has(self, m: dict[str, Any]) -> bool:
        return self._text in m

    def _encode(self, value: Any) -> Any:
        if type(value) is self._exact:
            return value
        t = self.type
        if self._codec:
            if not isinstance(value, t):
                raise MetadataTypeError(f"{self} holds {t.__name__}, not {type(value).__name__}")
            return cast(JSONCodec, value).to_dict()
        where = _misfit(value, t, "")
        if where is not None:
            inner = f": item {where[0]} is a {where[1]}" if where[0] else ""
            raise MetadataTypeError(f"{self} holds {_type_name(t)}, not {type(value).__name__}{inner}")
        return value

    def _decode(self, raw: Any) -> Any:
        if type(raw) is self._exact:  # a str, int, dict, ... under a key of exactly that type: nothing to check
            return raw
        t = self.type
        if self._codec:
            if isinstance(raw, t):  # a value placed in the map directly
                return raw
            if not isinstance(raw, dict):
                raise MetadataTypeError(f"{self} holds {t.__name__}; the stored value is a {type(raw).__name__}")
            try:
                return cast(Any, t).from_dict(raw)
            except (TypeError, ValueError, KeyError) as exc:
                raise MetadataTypeError(f"{self} holds {t.__name__}; the stored value does not fit: {exc}") from exc
        where = _misfit(raw, t, "")
        if where is not None:
            what = f"stored value's item {where[0]}" if where[0] else "stored value"
            raise MetadataTypeError(f"{self} holds {_type_name(t)}; the {what} is a {where[1]}")
        return raw


def _is_codec(t: Any) -> bool:
    return isinstance(t, type) and get_origin(t) is None and hasattr(t, "from_dict") and hasattr(t, "to_dict")


def _type_name(t: Any) -> str:
    if isinstance(t, type) and get_origin(t) is None:
        return t.__name__
    return str(t).replace("typing.", "")


def _misfit(value: Any, t: Any, path: str) -> tuple[str, str] | None:
    """``None`` when ``value`` fits ``t``; else where it does not (``""`` for the value itself) and what
    was found there. JSON's containers and unions are checked all the way down."""
    if t is Any or t is object:
        return None
    origin = get_origin(t)
    found = (path, type(value).__name__)
    if origin is None:
        return None if _matches(value, t) else found
    args = get_args(t)
    if origin is Union or origin is types.UnionType:
        return None if any(_misfit(value, a, path) is None for a in args) else found
    if origin is Literal:
        return None if any(value == a and type(value) is type(a) for a in args) else (path, repr(value))
    if not isinstance(value, origin):
        return found
    if origin is list and args:
        for i, item in enumerate(value):
            inner = _misfit(item, args[0], f"{path}[{i}]")
            if inner is not None:
                return inner
    elif origin is dict and len(args) == 2:
        for k, item in value.items():
            inner = _misfit(k, args[0], f"{path}[{k!r}] (its key)") or _misfit(item, args[1], f"{path}[{k!r}]")
            if inner is not None:
                return inner
    return None  # another parameterized type: its outer class fits, and that is as deep as it is checked


def _matches(value: Any, t: Any) -> bool:
    if t is None or t is type(None):
        return value is None
    if t is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if t is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, t)


def turn_meta_key(namespace: str, name: str, version: int, type_: type[T]) -> Key[T]:
    """A key for ``Turn.metadata``."""
    return Key(KeyFamily.TURN_METADATA, namespace, name, version, type_)


def turn_data_key(namespace: str, name: str, version: int, type_: type[T]) -> Key[T]:
    """A key for ``Turn.data``."""
    return Key(KeyFamily.TURN_DATA, namespace, name, version, type_)


def block_meta_key(namespace: str, name: str, version: int, type_: type[T]) -> Key[T]:
    """A key for ``Block.metadata``."""
    return Key(KeyFamily.BLOCK_METADATA, namespace, name, version, type_)
