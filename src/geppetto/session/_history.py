"""A session's snapshots in memory: entries sharing frozen blocks, and the Turns derived from them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..turns import Frozen, LazyBlockList, Turn, TurnData, TurnMetadata, Watch, copy_json, freeze, settled

__all__ = ["History", "Timeline"]


class _Entry:
    """One snapshot of a session's history: its id, maps and frozen blocks (see ``geppetto.turns._cow``),
    and the Turn object itself while it is the latest (what ``prompt``/``run`` returned)."""

    __slots__ = ("data", "frozen", "id", "live", "metadata")

    def __init__(self, turn: Turn, frozen: Frozen | None = None) -> None:
        self.id = turn.id
        self.live: Turn | None = turn
        self.frozen = frozen
        self.metadata: dict[str, Any] | None = None
        self.data: dict[str, Any] | None = None

    def settle(self, base: Frozen | None) -> Frozen:
        """Freeze the live Turn (what changed in it since ``base``, its origin) and keep its maps."""
        turn = self.live
        assert turn is not None
        frozen = self.frozen
        # settled once already (a seed, again when its inference completes) and nothing changed since: the
        # same snapshot, without another copy of the history's list
        if frozen is None or base is None or not settled(turn.blocks, base, frozen):
            frozen = self.frozen = freeze(turn.blocks, base)
        self.id = turn.id
        self.metadata = copy_json(dict(turn.metadata))
        self.data = copy_json(dict(turn.data))
        return frozen

    def turn(self) -> Turn:
        if self.live is not None:
            return self.live
        assert self.frozen is not None and self.metadata is not None and self.data is not None
        return Turn(
            self.frozen.lazy(),
            self.id,
            TurnMetadata(copy_json(self.metadata)),
            TurnData(copy_json(self.data)),
        )


class History(Sequence[Turn]):
    """A session's snapshots, oldest first: the latest is the Turn object the session returned; an
    older one is rebuilt on each read from the blocks it shares with the others (an isolated copy)."""

    def __init__(self, entries: Sequence[_Entry]) -> None:
        self._entries = tuple(entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(e.turn() for e in self._entries[index])
        return self._entries[index].turn()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"History({len(self)} snapshots)"


def _carried(turn: Turn) -> Watch | None:
    """A copy of the proof a reader keeps with ``turn``'s blocks, for a Turn derived from it."""
    watch = turn.blocks.held() if hasattr(turn.blocks, "held") else None
    if watch is None or not hasattr(watch.state, "copy"):
        return None
    return Watch(watch.state.copy(), watch.k)


def _unproven(out: Turn, origin: Frozen | None) -> list[int] | None:
    """The positions of ``out`` that may hold blocks this inference made or changed, when its blocks are
    still the list the session derived from ``origin`` (None: look at every block)."""
    blocks = out.blocks
    if origin is None or not isinstance(blocks, LazyBlockList) or blocks.origin is not origin:
        return None
    n = len(blocks)
    k = min(blocks.moved, len(origin.blocks), n)
    found = {i for i in blocks.touched if i < k}
    found.update(i for i in origin.patches if i < k)
    found.update(range(min(origin.keep, k), n))  # the seed's own new blocks, and everything after k
    return sorted(found)


def _derive(turn: Turn, frozen: Frozen, turn_id: str) -> Turn:
    """A Turn with ``turn``'s maps (copied) over ``frozen``'s blocks (shared until read)."""
    return Turn(
        frozen.lazy(_carried(turn)),
        turn_id,
        TurnMetadata(copy_json(dict(turn.metadata))),
        TurnData(copy_json(dict(turn.data))),
    )


class Timeline:
    """A session's snapshots in memory, oldest first: ``entries``; ``since`` counts the blocks added since
    the last snapshot that keeps its whole block list; ``known`` holds the ids of the blocks earlier
    snapshots hold."""

    def __init__(self) -> None:
        self.entries: list[_Entry] = []
        self.since = 0
        self.known: set[str] = set()

    @property
    def latest(self) -> Turn | None:
        return self.entries[-1].live if self.entries else None

    def push(self, turn: Turn) -> None:
        """Add ``turn`` as the latest snapshot (the one before it was settled by the caller). The snapshot
        before that one keeps its whole block list only as a checkpoint of the history (when the blocks
        added since the last one add up to its size); otherwise it is rebuilt from its parent on demand."""
        # Only the latest snapshot is the Turn object the caller holds; an older one is rebuilt on each read,
        # so editing a Turn that ``prompt`` or ``run`` returned earlier never changes the history.
        if self.entries:
            self.entries[-1].live = None
        if len(self.entries) >= 2:
            older = self.entries[-2].frozen
            if older is not None and older.parent is not None and older.whole:
                if self.since >= len(older.blocks):
                    self.since = 0
                else:
                    older.drop()
        self.entries.append(_Entry(turn))

    def settle_latest(self) -> Frozen | None:
        """Freeze the latest snapshot as it is now: what changed since it was derived from its origin
        (or, for a Turn from outside, block by block against the snapshot before it)."""
        if not self.entries:
            return None
        entry = self.entries[-1]
        turn = entry.live
        if turn is None:
            return entry.frozen
        blocks = turn.blocks
        if isinstance(blocks, LazyBlockList) and blocks.origin is not None:
            base: Frozen | None = blocks.origin
        else:
            base = self.entries[-2].frozen if len(self.entries) > 1 else None
        before = entry.frozen
        frozen = entry.settle(base)
        # settling again with nothing new returns the frozen list it had: its blocks are counted once
        if frozen is not before and frozen is not base:
            self.since += frozen.delta
            self.known.update(b.id for b in frozen.tail)
            self.known.update(b.id for b in frozen.patches.values())
        return frozen
