"""Copy on write for the snapshots of a long conversation.

A block that a snapshot holds is kept once as a :class:`FrozenBlock`: a private version that nothing
outside this module ever edits. Snapshots are lists of frozen versions (:class:`Frozen`), and the Turns
handed out over them hold a :class:`LazyBlockList`: its entries stay the shared frozen versions until
something reads one, and a read puts a private copy in its place. So deriving the next Turn from a
snapshot costs a copy of a list of pointers, not of every block; editing a Turn's blocks never changes
another Turn or a snapshot (the isolation ``Turn.clone()`` promises); and freezing a Turn again costs what
was read or added since (``freeze``), which is what a session and a store need to save only what changed.

A lazy list stays exact under every list operation: a read, a search, a comparison, an iteration or a
sort copies what it reads first; a structural change (insert, delete, reorder) is remembered by the
:class:`~geppetto.turns._watch.BlockList` it extends (``low``), so :func:`freeze` looks again at every
entry from there on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, SupportsIndex

from ._keys import BlockMetadata, copy_json
from ._model import Block, seal_block, seal_of
from ._watch import NO_EDIT, BlockList, Watch, same_json

__all__ = [
    "Frozen",
    "FrozenBlock",
    "LazyBlockList",
    "block_ids",
    "freeze",
    "freeze_block",
    "frozen_from",
    "held",
    "new_blocks",
    "origin_prefix",
    "thaw",
]


class FrozenBlock(Block):
    """A block version shared by snapshots. Only this module makes them, and it never hands one out:
    whoever reads it gets a copy (:func:`thaw`). ``wire``/``key``: a wire form a reader remembered for
    it; ``stored``: where a store keeps it (its own marker and the version's row number)."""

    # No slots: the class of a Block is switched in place, so the layout stays Block's; ``wire``, ``key``
    # and ``stored`` live in the instance dict.


def freeze_block(block: Block) -> FrozenBlock:
    """A frozen copy of ``block`` (a frozen block is its own frozen copy)."""
    if type(block) is FrozenBlock:
        return block
    copy = Block(
        block.kind, copy_json(block.payload), block.role, block.id, block.turn_id,
        BlockMetadata(copy_json(dict(block.metadata))),
    )  # fmt: skip
    d = copy.__dict__
    seal = seal_of(block)
    d["key"], d["wire"] = (seal.key, seal.wire) if seal is not None else (None, None)
    d["stored"] = None
    copy.__class__ = FrozenBlock
    return copy  # type: ignore[return-value]


def frozen_from(block: Block) -> FrozenBlock:
    """``block`` itself, made frozen: for a block just built from stored data that nobody else holds."""
    d = block.__dict__
    d["key"] = d["wire"] = d["stored"] = None
    block.__class__ = FrozenBlock
    return block  # type: ignore[return-value]


def thaw(frozen: FrozenBlock, watch: Watch | None = None) -> Block:
    """A private, editable copy of ``frozen``; sealed for ``watch`` (with the remembered wire form) when
    the copy sits where a reader's proof covers it."""
    d = frozen.__dict__
    metadata = BlockMetadata(copy_json(d["metadata"]))
    if watch is None:
        return Block(d["kind"], copy_json(d["payload"]), d["role"], d["id"], d["turn_id"], metadata)
    copy = Block(d["kind"], {}, d["role"], d["id"], d["turn_id"], metadata)
    seal = seal_block(copy, watch, payload=d["payload"])  # the payload copied once, into watched containers
    seal.key, seal.wire = d.get("key"), d.get("wire")
    return copy


class LazyBlockList(BlockList):
    """A Turn's blocks whose entries may still be shared frozen versions: any read copies the entries it
    reads first (see the module's docstring). ``origin``: the frozen list it was made from; ``moved``:
    the lowest index a change other than an append touched since then (``low`` is a reader's and is
    reset by it); ``touched``: the indices a read copied (those below ``moved`` are where they were)."""

    __slots__ = ()
    adopt = True
    """A Turn takes this list as its own as it is (any other list it copies into a BlockList)."""

    def __init__(self, blocks: Any = (), origin: Frozen | None = None) -> None:
        BlockList.__init__(self, blocks)
        self.origin = origin
        self.moved = NO_EDIT
        self.touched: set[int] = set()

    # -- remembering structural changes ------------------------------------------------------------
    def _at(self, index: Any) -> None:
        BlockList._at(self, index)
        self.moved = min(self.moved, self.low)

    def clear(self) -> None:
        self.moved = 0
        BlockList.clear(self)

    def reverse(self) -> None:
        self.moved = 0
        BlockList.reverse(self)

    # -- copying on read -------------------------------------------------------------------------
    def _read(self, i: int) -> Block:
        item = list.__getitem__(self, i)
        if type(item) is FrozenBlock:
            watch = self.watch
            item = thaw(item, watch if watch is not None and i < watch.k else None)
            list.__setitem__(self, i, item)
            self.touched.add(i)
        return item  # type: ignore[no-any-return]

    def _read_all(self) -> None:
        for i in range(len(self)):
            self._read(i)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            for i in range(*index.indices(len(self))):
                self._read(i)
            return list.__getitem__(self, index)
        i = index.__index__()
        return self._read(i + len(self) if i < 0 else i)

    def __iter__(self) -> Iterator[Block]:
        # By index, the length read at every step: a block appended while the list is iterated (a tool
        # loop adding results) is yielded too, as a list's own iterator does.
        i = 0
        while i < len(self):
            yield self._read(i)
            i += 1

    def __reversed__(self) -> Iterator[Block]:
        i = len(self) - 1
        while i >= 0:
            # a list shrunk meanwhile: past its end there is nothing to yield (list's reversed() stops too)
            if i < len(self):
                yield self._read(i)
            i -= 1

    def __contains__(self, value: object) -> bool:
        # identity first, as ``list.__contains__`` does: the block itself is found without comparing payloads
        return any(b is value or b == value for b in self)

    def index(self, value: Any, *args: Any) -> int:
        self._read_all()
        return list.index(self, value, *args)

    def count(self, value: Any) -> int:
        self._read_all()
        return list.count(self, value)

    def remove(self, value: Any) -> None:
        self._read_all()
        BlockList.remove(self, value)

    def pop(self, index: SupportsIndex = -1) -> Any:
        if self:
            i = index.__index__()
            self._read(i + len(self) if i < 0 else i)
        return BlockList.pop(self, index)

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._read_all()
        self.moved = 0
        BlockList.sort(self, *args, **kwargs)

    def copy(self) -> list[Any]:
        self._read_all()
        return list.copy(self)

    def __eq__(self, other: object) -> bool:
        self._read_all()
        if isinstance(other, LazyBlockList):
            other._read_all()
        return list.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Any) -> list[Any]:
        return self.copy() + list(other)

    def __mul__(self, n: SupportsIndex) -> list[Any]:
        return self.copy() * n

    __rmul__ = __mul__

    def __imul__(self, n: SupportsIndex) -> LazyBlockList:
        self._read_all()
        if n.__index__() <= 0:
            self.moved = 0
        BlockList.__imul__(self, n)
        return self

    def __repr__(self) -> str:
        return repr(self.copy())

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (list, (list(self),))

    def shared_copy(self, watch: Watch | None = None) -> LazyBlockList:
        """An isolated copy that shares every version it can (``Turn.clone`` of a Turn holding this list)."""
        return freeze(self, self.origin).lazy(watch)

    # -- for freeze ------------------------------------------------------------------------------
    def raw(self, i: int) -> Block:
        """Entry ``i`` as it is (a frozen version or a private copy): for :func:`freeze` only."""
        return list.__getitem__(self, i)  # type: ignore[no-any-return]


class Frozen:
    """A snapshot's blocks: ``blocks``, the frozen versions in order, and how they differ from
    ``parent`` (the snapshot they were derived from): ``blocks[:keep]`` are the parent's except at the
    positions in ``patches``, and ``tail`` follows them. A snapshot deep in a history may drop its whole
    list (:meth:`drop`) and rebuild it from its parent on demand."""

    __slots__ = ("_blocks", "keep", "memo", "parent", "patches", "tail")

    def __init__(
        self,
        blocks: list[FrozenBlock],
        parent: Frozen | None = None,
        keep: int = 0,
        patches: dict[int, FrozenBlock] | None = None,
    ) -> None:
        self._blocks: list[FrozenBlock] | None = blocks
        self.parent = parent
        self.keep = keep if parent is not None else 0
        self.patches = patches or {}
        self.tail = blocks[self.keep :]
        self.memo: dict[str, Any] | None = None  # facts measured on these blocks, for whoever measured them

    def size(self) -> int:
        """How many blocks this snapshot holds (without rebuilding a dropped list)."""
        return self.keep + len(self.tail)

    @property
    def delta(self) -> int:
        """How many entries this snapshot holds that its parent does not hold at the same place."""
        return len(self.tail) + len(self.patches)

    @property
    def blocks(self) -> list[FrozenBlock]:
        if self._blocks is not None:
            return self._blocks
        chain: list[Frozen] = []
        node: Frozen | None = self
        while node is not None and node._blocks is None:
            chain.append(node)
            node = node.parent
        out = list(node._blocks) if node is not None and node._blocks is not None else []
        for step in reversed(chain):
            del out[step.keep :]
            for i, block in step.patches.items():
                out[i] = block
            out.extend(step.tail)
        return out

    def at(self, i: int) -> FrozenBlock:
        """Entry ``i`` (``0 <= i < size()``), read through the parents of a snapshot that dropped its list
        instead of rebuilding it."""
        node = self
        while node._blocks is None:
            if i >= node.keep:
                return node.tail[i - node.keep]
            patched = node.patches.get(i)
            if patched is not None:
                return patched
            assert node.parent is not None  # a root keeps its list
            node = node.parent
        return node._blocks[i]

    @property
    def whole(self) -> bool:
        """Whether this snapshot still keeps its whole list."""
        return self._blocks is not None

    def drop(self) -> None:
        """Forget the whole list (it is rebuilt from the parent's when asked for); a root keeps it."""
        if self.parent is not None:
            self._blocks = None

    def lazy(self, watch: Watch | None = None) -> LazyBlockList:
        """A Turn's block list over these versions (nothing copied until read)."""
        out = LazyBlockList(self.blocks, self)
        out.watch = watch
        return out


def held(blocks: list[Block]) -> Iterator[Block]:
    """The entries of ``blocks`` as they are held (frozen versions or private copies), read without copying
    any: for reading only, never for a change."""
    return list.__iter__(blocks)


def origin_prefix(blocks: list[Block]) -> Frozen | None:
    """The snapshot ``blocks`` provably starts with (a :class:`LazyBlockList` made from it that nothing
    read, moved or shortened since: its first ``len(origin)`` entries are the snapshot's own), else None."""
    if type(blocks) is not LazyBlockList or blocks.origin is None or blocks.touched:
        return None
    n = blocks.origin.size()
    return blocks.origin if blocks.moved >= n and len(blocks) >= n else None


def block_ids(blocks: list[Block]) -> set[str]:
    """The ids of ``blocks``, read without copying any (ids never change what a block holds)."""
    return {b.id for b in list.__iter__(blocks)}


def new_blocks(blocks: list[Block], ids: set[str]) -> list[Block]:
    """The blocks of ``blocks`` whose id is not in ``ids``, in order; only those are read (copied)."""
    return [blocks[i] for i, b in enumerate(list.__iter__(blocks)) if b.id not in ids]


class Mark:
    """Where a list of blocks stood (see :func:`mark` and :func:`added`)."""

    __slots__ = ("blocks", "moved", "n", "raw")

    def __init__(self, blocks: list[Block]) -> None:
        self.blocks, self.n = blocks, len(blocks)
        self.moved = blocks.moved if type(blocks) is LazyBlockList else None
        self.raw = list.copy(blocks)  # the entries as they were (pointers only)


def mark(blocks: list[Block]) -> Mark:
    """Remember ``blocks`` as they are now, to ask later which blocks were :func:`added`."""
    return Mark(blocks)


def added(blocks: list[Block], since: Mark) -> list[Block]:
    """The blocks of ``blocks`` that were not there at ``since`` (by id), in order. When ``blocks`` is the
    same copy-on-write list and nothing but appends changed it, that is its tail: nothing else is read."""
    if (
        blocks is since.blocks
        and type(blocks) is LazyBlockList
        and blocks.moved == since.moved
        and len(blocks) >= since.n
    ):
        return list(blocks[since.n :])
    return new_blocks(blocks, {b.id for b in since.raw})


def freeze(blocks: list[Block], base: Frozen | None) -> Frozen:
    """``blocks`` as frozen versions, sharing with ``base`` what provably did not change.

    For a :class:`LazyBlockList` made from ``base``, the cost is what was read or added since: entries
    still frozen are ``base``'s own, entries read are compared with the version they were copied from,
    and only the entries from the first structural change on are looked at one by one. Any other list
    is compared with ``base`` position by position."""
    n = len(blocks)
    if base is None:
        return Frozen([freeze_block(_raw(blocks, i)) for i in range(n)])
    old = base.blocks
    patches: dict[int, FrozenBlock] = {}
    if type(blocks) is LazyBlockList and blocks.origin is base and not blocks.touched and blocks.moved >= len(old):
        if n == len(old):
            return base  # nothing read, moved or added since it was made: the same snapshot
        if n > len(old):  # appends only: the base's entries and the new ones
            return Frozen(old + [freeze_block(_raw(blocks, i)) for i in range(len(old), n)], base, len(old))
    if type(blocks) is LazyBlockList and blocks.origin is base:
        k = min(blocks.moved, len(old), n)
        out = old[:k]
        for i in sorted(blocks.touched):
            if i < k:
                item = _raw(blocks, i)
                if type(item) is not FrozenBlock and not _same_block(item, old[i]):
                    out[i] = patches[i] = freeze_block(item)
        keep = k
    else:
        out, k = [], 0
    for i in range(k, n):
        item = _raw(blocks, i)
        if type(item) is FrozenBlock:
            out.append(item)
        elif i < len(old) and _same_block(item, old[i]):
            out.append(old[i])
        else:
            out.append(freeze_block(item))
    if k == 0:  # compared one by one: what matched at the start is the parent's
        keep, limit = 0, min(len(old), n)
        while keep < limit and out[keep] is old[keep]:
            keep += 1
    if keep == len(old) == n and not patches:
        return base  # nothing changed: the same snapshot
    return Frozen(out, base, keep, patches)


def rebase(blocks: list[Block], frozen: Frozen, watch: Watch | None) -> bool:
    """Make ``blocks`` (a :class:`LazyBlockList` that ``frozen`` was just frozen from over its origin, nothing
    changed since) a list
    over ``frozen``'s versions in place, as ``frozen.lazy(watch)`` would make a new one: only the entries
    read or added since its origin are replaced, so the cost is theirs, not the list's. False (nothing
    done) when ``blocks`` is not such a list."""
    if type(blocks) is not LazyBlockList or len(blocks) != frozen.size():
        return False
    changed: list[int] = []
    if blocks.origin is frozen and not blocks.touched:
        pass
    elif blocks.origin is not None and blocks.origin is frozen.parent and blocks.moved >= frozen.keep:
        changed = [*sorted(i for i in blocks.touched if i < frozen.keep), *range(frozen.keep, len(blocks))]
    else:
        return False
    at = frozen.at
    for i in changed:
        list.__setitem__(blocks, i, at(i))
    blocks.origin, blocks.touched, blocks.moved = frozen, set(), NO_EDIT
    blocks.low, blocks.watch = NO_EDIT, watch
    return True


def settled(blocks: list[Block], base: Frozen, frozen: Frozen) -> bool:
    """Whether ``frozen``, made by :func:`freeze` from ``blocks`` over ``base`` with appends only, still holds
    them: the same list, nothing read, moved or added since, and each appended entry equal to its frozen
    version (an appended block is the caller's own object, which may have been edited). O(the appends)."""
    if (
        type(blocks) is not LazyBlockList
        or blocks.origin is not base
        or frozen.parent is not base
        or blocks.touched
        or frozen.patches
    ):
        return False
    k, n = frozen.keep, len(blocks)
    if k != base.size() or blocks.moved < k or n != frozen.size():
        return False
    tail = frozen.tail
    for i in range(k, n):
        item, version = _raw(blocks, i), tail[i - k]
        if item is not version and (type(item) is FrozenBlock or not _same_block(item, version)):
            return False
    return True


def _same_block(a: Block, b: Block) -> bool:
    """Equal as stored and as sent: ``==`` of blocks ignores the order of a mapping's keys, but the order
    of a tool call's arguments is part of what goes on the wire (and into fingerprints)."""
    if a.kind is not b.kind or a.role != b.role or a.id != b.id or a.turn_id != b.turn_id:
        return False
    return same_json(a.payload, b.payload) and same_json(dict(a.metadata), dict(b.metadata))


def _raw(blocks: list[Block], i: int) -> Block:
    return list.__getitem__(blocks, i)
