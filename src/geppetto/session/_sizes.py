"""What a store's per-session summary measures on each saved snapshot, at the cost of what changed since
the snapshot measured before (see ``geppetto.session._requests.inference_totals``).

A snapshot (:class:`~geppetto.turns._cow.Frozen`) remembers, in its ``memo``, the summed item sizes of its
first ``q`` blocks; a snapshot derived from it whose first ``q`` blocks provably did not change (the
derivation's ``keep`` and ``patches`` say so) starts from that sum, and the blocks a new response added are
looked for only where the snapshot changed."""

from __future__ import annotations

from collections.abc import Iterable

from ..turns import BLOCK_META_RESPONSE_ID, BlockKind, Frozen

__all__ = ["Measured"]

_DEPTH = 64
"""How many derivations back an earlier measure is looked for (as far as a store compares snapshots)."""


class Measured:
    """One snapshot, ready to answer where each response begins and the stateless size of what precedes it."""

    def __init__(self, frozen: Frozen) -> None:
        self.frozen, self.blocks = frozen, frozen.blocks
        keep, patched = len(self.blocks), set[int]()
        node: Frozen | None = frozen
        self.base: tuple[int, int, int] | None = None
        for _ in range(_DEPTH):
            if node is None:
                break
            held = (node.memo or {}).get("items")
            if held is not None and held[0] <= keep and not any(i < held[0] for i in patched):
                self.base = held
                break
            keep = min(keep, node.keep) if node.parent is not None else 0
            patched.update(node.patches)
            node = node.parent
        self.keep, self.patched = keep, patched

    def firsts(self, wanted: Iterable[str]) -> dict[str, int]:
        """The index of the first block of each response id in ``wanted`` found in the snapshot. Responses new
        since the measured snapshot are where it changed; any other is looked for in every block."""
        wanted = set(wanted) - {""}
        key = str(BLOCK_META_RESPONSE_ID)  # the raw key: one dict lookup a block
        found: dict[str, int] = {}
        blocks = self.blocks
        if self.base is not None:
            # a patch of an earlier derivation may lie past the end of a snapshot that dropped blocks since
            for i in [p for p in sorted(self.patched) if p < self.keep] + list(range(self.keep, len(blocks))):
                rid = blocks[i].metadata.get(key)
                if rid in wanted and rid not in found:
                    found[rid] = i
        if len(found) < len(wanted):
            found = {}
            for i, b in enumerate(blocks):
                rid = b.metadata.get(key)
                if rid in wanted and rid not in found:
                    found[rid] = i
        return found

    def stateless_bytes(self, first: int) -> int:
        """The bytes of ``blocks[:first]`` as a request's input (``items_bytes``), from the last measure that
        still holds; remembers this one for the snapshots derived from this one."""
        from ..providers.openai_responses import items_sizes

        blocks = self.blocks
        start, total, count = self.base if self.base is not None and self.base[0] <= first else (0, 0, 0)
        q = first
        key = str(BLOCK_META_RESPONSE_ID)
        while q > start:  # a measure ends where no later block's item depends on the blocks before it
            if blocks[q - 1].kind is BlockKind.REASONING:
                q -= 1  # its item depends on the next block
                continue
            rid, run = blocks[q - 1].metadata.get(key), q - 1
            while rid and run > start and blocks[run - 1].metadata.get(key) == rid:
                run -= 1
            if not rid or not any(b.kind is BlockKind.REASONING for b in blocks[run:q]):
                break
            q = run  # a message that joins this run may go with its id (its response's reasoning went)
        more, n = items_sizes(blocks[start:q])
        total, count = total + more, count + n
        if self.frozen.memo is None:
            self.frozen.memo = {}
        self.frozen.memo["items"] = (q, total, count)
        rest, n = items_sizes(blocks[q:first]) if q < first else (0, 0)
        total, count = total + rest, count + n
        return 2 + total + max(count - 1, 0)
