"""Edit watch: how a reader proves a long Turn's first blocks unchanged without reading them again.

A Turn's ``blocks`` is a :class:`BlockList`: a list that remembers the lowest index any change other
than an append touched (``low``), so a reader that proved blocks ``[0, k)`` knows at once whether an
insertion, removal, replacement or reorder reached them. A block the reader *sealed* reports every
change of what it is: its kind, role, payload at any depth, and the metadata keys readers registered
(:func:`watch_metadata_keys`). Sealing makes the payload's dicts and lists watched ones
(:class:`WatchedDict`, :class:`WatchedList`: copies, equal and JSON-serializable like the originals,
sharing their strings and numbers); a change sets ``dirty`` on every :class:`Watch` that holds the
block and forgets the block's remembered wire form. A payload value that is neither JSON nor a dict or
list (an object a tool returned) cannot be watched: the block is marked ``loose`` and a reader checks
it again every time.

Writing a value equal to the one held (same JSON: ``1``, ``1.0`` and ``True`` differ) is no change.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, SupportsIndex

from ._keys import BlockMetadata

__all__ = [
    "NO_EDIT",
    "BlockList",
    "Seal",
    "Watch",
    "WatchedDict",
    "WatchedList",
    "WatchedMetadata",
    "same_json",
    "watch_metadata_keys",
    "watched",
]

NO_EDIT = sys.maxsize
"""``BlockList.low`` when no change other than an append happened since it was last reset."""

_WATCHED_KEYS: set[str] = set()


def watch_metadata_keys(*keys: object) -> None:
    """Register block-metadata keys whose changes a sealed block reports (the others never do)."""
    _WATCHED_KEYS.update(str(k) for k in keys)


class Watch:
    """One reader's hold on a :class:`BlockList`: ``k`` blocks proven, ``dirty`` once a sealed block
    among them changed, and ``state``, the reader's own (copied with the Turn when it has ``copy()``)."""

    __slots__ = ("dirty", "k", "state")

    def __init__(self, state: Any = None, k: int = 0) -> None:
        self.dirty = False
        self.k = k
        self.state = state


class Seal:
    """What a sealed block carries: the watch or watches holding it, and its remembered wire form
    (``wire``, valid for the reader's key ``key``; ``key`` is None when nothing is remembered)."""

    __slots__ = ("key", "loose", "owners", "wire")

    def __init__(self, owner: Watch) -> None:
        self.owners: Watch | tuple[Watch, ...] = owner
        self.key: Any = None
        self.wire: Any = None
        self.loose = False

    def touch(self) -> None:
        self.key = None
        owners = self.owners
        if type(owners) is tuple:
            for watch in owners:
                watch.dirty = True
        else:
            owners.dirty = True  # type: ignore[union-attr]

    def hold(self, watch: Watch) -> None:
        owners = self.owners
        if owners is watch or (isinstance(owners, tuple) and watch in owners):
            return
        self.owners = (*owners, watch) if isinstance(owners, tuple) else (owners, watch)


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON text: same types (``1``, ``1.0`` and ``True`` differ, a watched dict is a dict), same
    key order. Strings shared between the two are the very same object, so most checks are ``is``."""
    if a is b:
        return True
    ta, tb = type(a), type(b)
    if ta is not tb and _JSON_KIND.get(ta, ta) is not _JSON_KIND.get(tb, tb):
        return False
    if isinstance(a, dict):
        if len(a) != len(b):
            return False
        other = iter(b.items())
        for ka, va in a.items():
            kb, vb = next(other)
            if ka != kb or not same_json(va, vb):
                return False
        return True
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(va, vb) for va, vb in zip(a, b, strict=True))
    return bool(a == b)


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def watched(value: Any, seal: Seal) -> Any:
    """``value`` with its dicts and lists made watched ones reporting to ``seal`` (copies; scalars are
    shared). A value that cannot be watched marks the seal ``loose`` and is kept as it is."""
    kind = type(value)
    if kind is dict or kind is WatchedDict:
        out = WatchedDict(value)  # the C copy (no __setitem__ per key); containers inside are replaced below
        for k, v in out.items():
            if type(v) not in _SCALAR_TYPES:
                dict.__setitem__(out, k, watched(v, seal))  # a value replaced: the dict keeps its size
        out._seal = seal
        return out
    if kind is list or kind is WatchedList:
        items = WatchedList(value)
        for i, v in enumerate(items):
            if type(v) not in _SCALAR_TYPES:
                list.__setitem__(items, i, watched(v, seal))
        items._seal = seal
        return items
    if kind not in _SCALAR_TYPES:
        seal.loose = True
    return value


def _touch(container: Any) -> Seal | None:
    seal: Seal | None = getattr(container, "_seal", None)
    if seal is not None:
        seal.touch()
    return seal


class _WritesThroughSetitem(dict[str, Any]):
    """``setdefault``, ``update`` and ``|=`` of a watched map, each write going through its
    ``__setitem__`` (the C methods of ``dict`` would bypass it)."""

    __slots__ = ()

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> Any:  # type: ignore[misc]
        self.update(other)
        return self


class WatchedDict(_WritesThroughSetitem):
    """A dict in a sealed block's payload: every change is reported to the block's seal."""

    __slots__ = ("_seal",)
    _seal: Seal

    def __setitem__(self, key: str, value: Any) -> None:
        if key in self and same_json(dict.__getitem__(self, key), value):
            return
        seal = _touch(self)
        dict.__setitem__(self, key, value if seal is None else watched(value, seal))

    def __delitem__(self, key: str) -> None:
        dict.__delitem__(self, key)
        _touch(self)

    def pop(self, key: str, *default: Any) -> Any:
        had = key in self
        value = dict.pop(self, key, *default)
        if had:
            _touch(self)
        return value

    def popitem(self) -> tuple[str, Any]:
        item = dict.popitem(self)
        _touch(self)
        return item

    def clear(self) -> None:
        if self:
            _touch(self)
        dict.clear(self)

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (dict, (dict(self),))  # copies and pickles are plain dicts


class WatchedList(list[Any]):
    """A list in a sealed block's payload: every change is reported to the block's seal."""

    __slots__ = ("_seal",)
    _seal: Seal

    def _wrap(self, value: Any) -> Any:
        seal = _touch(self)
        return value if seal is None else watched(value, seal)

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, slice):
            list.__setitem__(self, index, [self._wrap(v) for v in value])
        else:
            list.__setitem__(self, index, self._wrap(value))

    def __delitem__(self, index: Any) -> None:
        list.__delitem__(self, index)
        _touch(self)

    def append(self, value: Any) -> None:
        list.append(self, self._wrap(value))

    def extend(self, values: Iterable[Any]) -> None:
        list.extend(self, [self._wrap(v) for v in values])

    def __iadd__(self, values: Iterable[Any]) -> WatchedList:  # type: ignore[misc]
        self.extend(values)
        return self

    def __imul__(self, n: SupportsIndex) -> WatchedList:
        _touch(self)
        list.__imul__(self, n)
        return self

    def insert(self, index: SupportsIndex, value: Any) -> None:
        list.insert(self, index, self._wrap(value))

    def pop(self, index: SupportsIndex = -1) -> Any:
        value = list.pop(self, index)
        _touch(self)
        return value

    def remove(self, value: Any) -> None:
        list.remove(self, value)
        _touch(self)

    def clear(self) -> None:
        _touch(self)
        list.clear(self)

    def sort(self, *args: Any, **kwargs: Any) -> None:
        _touch(self)
        list.sort(self, *args, **kwargs)

    def reverse(self) -> None:
        _touch(self)
        list.reverse(self)

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (list, (list(self),))


class WatchedMetadata(_WritesThroughSetitem, BlockMetadata):
    """A sealed block's metadata (the same map, its class switched): a change of a registered key is
    reported to the block's seal."""

    __slots__ = ()

    def _changed(self, key: str, value: Any = None, *, removed: bool = False) -> bool:
        if key not in _WATCHED_KEYS:
            return False
        if removed:
            return key in self
        return key not in self or not same_json(dict.__getitem__(self, key), value)

    def __setitem__(self, key: str, value: Any) -> None:
        if self._changed(key, value):
            _touch(self)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: str) -> None:
        dict.__delitem__(self, key)
        if key in _WATCHED_KEYS:
            _touch(self)

    def pop(self, key: str, *default: Any) -> Any:
        if self._changed(key, removed=True):
            _touch(self)
        return dict.pop(self, key, *default)

    def popitem(self) -> tuple[str, Any]:
        _touch(self)
        return dict.popitem(self)

    def clear(self) -> None:
        if any(k in _WATCHED_KEYS for k in self):
            _touch(self)
        dict.clear(self)

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (BlockMetadata, (dict(self),))


def watch_metadata(metadata: BlockMetadata, seal: Seal) -> WatchedMetadata:
    """Switch ``metadata`` (the same object: nothing holding it is cut off) to a watched map."""
    metadata.__class__ = WatchedMetadata
    metadata._seal = seal  # type: ignore[attr-defined]
    return metadata  # type: ignore[return-value]


class BlockList(list[Any]):
    """``Turn.blocks``: a list that remembers the lowest index a change other than an append touched."""

    # ``moved``, ``origin`` and ``touched`` are a LazyBlockList's (geppetto.turns._cow): one layout for both.
    __slots__ = ("low", "moved", "origin", "touched", "watch")

    def __init__(self, blocks: Iterable[Any] = ()) -> None:
        list.__init__(self, blocks)
        self.low = NO_EDIT
        self.watch: Watch | None = None

    def held(self) -> Watch | None:
        """The watch whose proof of the first ``k`` blocks still holds (no change marked it dirty, no list
        change reached below ``k``), else None."""
        watch = self.watch
        if watch is None or watch.dirty or self.low < watch.k or watch.k > len(self):
            return None
        return watch

    def _at(self, index: Any) -> None:
        n = len(self)
        if isinstance(index, slice):
            start = index.indices(n)[0] if index.step is None or index.step > 0 else 0
        else:
            start = index.__index__()
            start = start + n if start < 0 else start
        self.low = min(self.low, max(0, start))

    def __setitem__(self, index: Any, value: Any) -> None:
        self._at(index)
        list.__setitem__(self, index, value)

    def __delitem__(self, index: Any) -> None:
        self._at(index)
        list.__delitem__(self, index)

    def insert(self, index: SupportsIndex, value: Any) -> None:
        self._at(min(index.__index__(), len(self)))
        list.insert(self, index, value)

    def pop(self, index: SupportsIndex = -1) -> Any:
        if self:
            self._at(index)
        return list.pop(self, index)

    def remove(self, value: Any) -> None:
        self._at(self.index(value))
        list.remove(self, value)

    def clear(self) -> None:
        self.low = 0
        list.clear(self)

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self.low = 0
        list.sort(self, *args, **kwargs)

    def reverse(self) -> None:
        self.low = 0
        list.reverse(self)

    def __imul__(self, n: SupportsIndex) -> BlockList:
        if n.__index__() <= 0:
            self.low = 0
        list.__imul__(self, n)
        return self

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (list, (list(self),))


_JSON_KIND: dict[type, type] = {WatchedDict: dict, WatchedList: list}
