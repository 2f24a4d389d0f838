"""Anchor selection: which stored response provably holds the Turn up to its last block (DESIGN §5).

The anchor is the latest response whose blocks are contiguous (the seeds' rule) and whose recorded
prefix fingerprint equals the fingerprint of the Turn up to its last block, so any insertion,
removal, reorder or edit before it is caught. One pass over the blocks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from geppetto.turns import BLOCK_META_PREFIX_FINGERPRINT, BLOCK_META_RESPONSE_ID, Block, Turn

from ._items import block_identity

__all__ = [
    "AnchorScan",
    "blocks_after_response",
    "find_best_anchor",
    "fingerprint_step",
    "is_valid_anchor",
    "prefix_fingerprint",
    "scan_anchors",
    "tag_blocks",
]


def fingerprint_step(previous: str, identity: Any) -> str:
    """Roll the fingerprint over one held block (sha256 of the previous digest and canonical JSON)."""
    if identity is None:
        return previous
    data = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{previous}\n{data}".encode()).hexdigest()


def prefix_fingerprint(blocks: Iterable[Block], *, include_system: bool = True) -> str:
    """The rolling fingerprint over ``blocks`` ("" for nothing held)."""
    fp = ""
    for block in blocks:
        fp = fingerprint_step(fp, block_identity(block, include_system=include_system))
    return fp


def _meta_str(block: Block, key: str) -> str | None:
    value = block.metadata.get(key)
    return value if isinstance(value, str) and value else None


@dataclass
class _Span:
    first: int
    last: int
    contiguous: bool = True
    fingerprint_ok: bool = False


@dataclass
class AnchorScan:
    """What one pass found: per response id its span, contiguity and fingerprint check."""

    spans: dict[str, _Span]

    def valid(self, response_id: str) -> bool:
        span = self.spans.get(response_id)
        return span is not None and span.contiguous and span.fingerprint_ok

    def best(self) -> str | None:
        best_id, best_last = None, -1
        for rid, span in self.spans.items():
            if span.contiguous and span.fingerprint_ok and span.last > best_last:
                best_id, best_last = rid, span.last
        return best_id

    def reason(self) -> str:
        """Why there is no anchor, for logs."""
        if not self.spans:
            return "no block carries a response id"
        broken = [r for r, s in self.spans.items() if not s.contiguous]
        edited = [r for r, s in self.spans.items() if s.contiguous and not s.fingerprint_ok]
        parts = []
        if broken:
            parts.append(f"blocks of {', '.join(broken)} are no longer contiguous")
        if edited:
            parts.append(f"the Turn before the end of {', '.join(edited)} changed (fingerprint mismatch)")
        return "; ".join(parts) or "no valid anchor"


def scan_anchors(turn: Turn, *, include_system: bool = True) -> AnchorScan:
    """One O(n) pass over the Turn: spans, contiguity and fingerprint check of every response."""
    spans: dict[str, _Span] = {}
    rid_key, fp_key = str(BLOCK_META_RESPONSE_ID), str(BLOCK_META_PREFIX_FINGERPRINT)
    fp = ""
    for i, block in enumerate(turn.blocks):
        fp = fingerprint_step(fp, block_identity(block, include_system=include_system))
        rid = _meta_str(block, rid_key)
        if rid is None:
            continue
        span = spans.get(rid)
        if span is None:
            span = spans[rid] = _Span(i, i)
        elif span.last != i - 1:
            span.contiguous = False
        span.last = i
        span.fingerprint_ok = _meta_str(block, fp_key) == fp
    return AnchorScan(spans)


def find_best_anchor(turn: Turn, *, include_system: bool = True) -> str | None:
    """The latest response id that is a valid anchor, or None (send the whole Turn)."""
    return scan_anchors(turn, include_system=include_system).best()


def is_valid_anchor(turn: Turn, response_id: str, *, include_system: bool = True) -> bool:
    """True when ``response_id``'s blocks exist, are contiguous and its fingerprint still matches."""
    return scan_anchors(turn, include_system=include_system).valid(response_id)


def blocks_after_response(turn: Turn, response_id: str) -> list[Block]:
    """The blocks after the last block of ``response_id``; [] when there are none or it is absent."""
    rid_key = str(BLOCK_META_RESPONSE_ID)
    for i in range(len(turn.blocks) - 1, -1, -1):
        if _meta_str(turn.blocks[i], rid_key) == response_id:
            return list(turn.blocks[i + 1 :])
    return []


def tag_blocks(turn: Turn, start: int, response_id: str, *, include_system: bool = True) -> None:
    """Stamp ``turn.blocks[start:]`` with ``response_id`` and the rolling prefix fingerprint after each."""
    fp = prefix_fingerprint(turn.blocks[:start], include_system=include_system)
    for block in turn.blocks[start:]:
        fp = fingerprint_step(fp, block_identity(block, include_system=include_system))
        BLOCK_META_RESPONSE_ID.set(block.metadata, response_id)
        BLOCK_META_PREFIX_FINGERPRINT.set(block.metadata, fp)
