"""Anchor selection: which stored response provably holds the Turn up to its last block (DESIGN §5).

Every block of a stored response carries its ``response_id``, the number of blocks the response
produced (``openai.response_blocks@v1``) and the **prefix fingerprint at the end of that response**:
a digest of the canonical wire form of every block the server then holds, sealed with the server
object that holds it (``chain_seed``). A response is an anchor when its blocks are contiguous, all of
them are still there (so its span ends on its real last block), and the fingerprint of the Turn up
to that block equals the recorded one; any insertion, removal, reorder or edit before it, or the loss
of any of its own blocks, is caught. One pass over the blocks, O(n): each block's wire form is hashed
once into one running sha256, and a digest is taken only where a response's run of blocks ends.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from geppetto.turns import (
    BLOCK_META_PREFIX_FINGERPRINT,
    BLOCK_META_RESPONSE_ID,
    Block,
    Turn,
    block_meta_key,
    copy_json,
)

from ._items import RESPONSE_BLOCKS, block_identity
from ._state import ConversationState, get_state

__all__ = [
    "ANCHOR_REFUSED",
    "REASON_TEXT",
    "AnchorScan",
    "blocks_after_response",
    "chain_seed",
    "find_best_anchor",
    "is_valid_anchor",
    "prefix_fingerprint",
    "prefix_hasher",
    "scan_anchors",
    "seal",
    "tag_blocks",
]

ANCHOR_REFUSED = block_meta_key("openai", "not_anchorable", 1, str)
"""``openai.not_anchorable@v1``: why a stored response can never be an anchor (the server holds an item
the Turn does not replay, e.g. a function call cut off by ``max_output_tokens``)."""

REASON_TEXT = {
    "not_contiguous": "its blocks are no longer contiguous",
    "not_anchorable": "the server holds items the Turn does not replay",
    "not_tagged": "it carries no fingerprint (another provider, or store=False)",
    "response_incomplete": "some of its blocks were removed",
    "fingerprint_mismatch": "fingerprint mismatch: the Turn before its end changed, or it was answered in "
    "another chain or conversation",
}
"""Why a response is not an anchor, by reason code."""

_CANON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode
_RID, _FP = str(BLOCK_META_RESPONSE_ID), str(BLOCK_META_PREFIX_FINGERPRINT)
_COUNT, _REFUSED = str(RESPONSE_BLOCKS), str(ANCHOR_REFUSED)


def chain_seed(state: ConversationState | None, mode: str | None = None) -> str:
    """What holds the context before the Turn's first block, folded into every fingerprint.

    ``""`` when the Turn holds the whole context of a chain; ``after:<id>`` for a fresh Turn continuing
    response ``<id>``; ``conversation:<id>`` in conversation mode (the conversation holds the context).
    """
    mode = mode or (state.mode if state else "chained")
    if mode == "conversation":
        return f"conversation:{state.conversation_id if state and state.conversation_id else ''}"
    return f"after:{state.base}" if state and state.base else ""


def seal(seed: str, digest: str) -> str:
    """The fingerprint recorded for a Turn prefix whose wire digest is ``digest``, under ``seed``."""
    return hashlib.sha256(f"{seed}\n{digest}".encode()).hexdigest() if seed else digest


_MEMO = "_geppetto_wire"
"""Where a block remembers its wire form (in its instance ``__dict__``, outside its fields)."""


def _wire(block: Block, include_system: bool) -> bytes | None:
    """The canonical wire form of ``block`` as it goes into fingerprints, None when it is never sent.

    It is a function of the block's kind, role and payload alone, and a scan hashes every block of the
    Turn on every request, so the block keeps the bytes with a snapshot of what they were made from and
    they are reused while :func:`_same` finds the block unchanged: edits in place, new payload values,
    another role or kind all make them again.
    """
    memo = block.__dict__.get(_MEMO)
    if (
        memo is not None
        and memo[0] is include_system
        and memo[1] is block.kind
        and memo[2] == block.role
        and _same(memo[3], block.payload)
    ):
        wire: bytes | None = memo[4]
        return wire
    identity = block_identity(block, include_system=include_system)
    wire = None if identity is None else (_CANON(identity) + "\n").encode()
    block.__dict__[_MEMO] = (include_system, block.kind, block.role, copy_json(block.payload), wire)
    return wire


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON text: same types (``1``, ``1.0`` and ``True`` differ), same dict key order. The
    snapshot shares its strings with the payload (``copy_json`` copies containers only), so most values
    are the very same object."""
    kind = type(a)
    if kind is not type(b):
        return False
    if kind is dict:
        if len(a) != len(b):
            return False
        other = iter(b.items())
        for ka, va in a.items():
            kb, vb = next(other)
            if ka != kb or (va is not vb and not _same(va, vb)):
                return False
        return True
    if kind is list:
        if len(a) != len(b):
            return False
        other = iter(b)
        for va in a:
            vb = next(other)
            if va is not vb and not _same(va, vb):
                return False
        return True
    return bool(a == b)


def _absorb(h: Any, block: Block, include_system: bool) -> None:
    wire = _wire(block, include_system)
    if wire is not None:
        h.update(wire)


def prefix_hasher(blocks: Iterable[Block], *, include_system: bool = True) -> Any:
    """A running sha256 over the wire form of ``blocks`` (copy it before adding more)."""
    h = hashlib.sha256()
    for block in blocks:
        _absorb(h, block, include_system)
    return h


def prefix_fingerprint(blocks: Iterable[Block], *, include_system: bool = True, seed: str = "") -> str:
    """The fingerprint of a Turn whose first blocks are ``blocks``."""
    return seal(seed, prefix_hasher(blocks, include_system=include_system).hexdigest())


@dataclass
class _Span:
    first: int
    last: int
    seen: int = 1
    contiguous: bool = True
    expected: int | None = None
    refused: bool = False
    fingerprint_ok: bool = False

    def problem(self) -> str | None:
        """The reason code that keeps this response from anchoring, or None for a valid anchor."""
        if not self.contiguous:
            return "not_contiguous"
        if self.refused:
            return "not_anchorable"
        if self.expected is None:
            return "not_tagged"
        if self.seen != self.expected:
            return "response_incomplete"
        return None if self.fingerprint_ok else "fingerprint_mismatch"


@dataclass
class AnchorScan:
    """What one pass found: per response id its span and checks; ``hasher`` covers the whole Turn."""

    spans: dict[str, _Span]
    hasher: Any = field(default=None, repr=False)

    def valid(self, response_id: str) -> bool:
        span = self.spans.get(response_id)
        return span is not None and span.problem() is None

    def best(self) -> str | None:
        best_id, best_last = None, -1
        for rid, span in self.spans.items():
            if span.last > best_last and span.problem() is None:
                best_id, best_last = rid, span.last
        return best_id

    def reason_code(self) -> str:
        """Why the latest response is not an anchor: a code from ``REASON_TEXT`` ("" with no responses)."""
        if not self.spans:
            return ""
        latest = max(self.spans.values(), key=lambda s: s.last)
        return latest.problem() or ""

    def reason(self) -> str:
        """Why there is no anchor, naming each response, for logs."""
        if not self.spans:
            return "no block carries a response id"
        parts = [f"{rid}: {REASON_TEXT[p]}" for rid, s in self.spans.items() if (p := s.problem())]
        return "; ".join(parts) or "no valid anchor"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def scan_anchors(turn: Turn, *, include_system: bool = True, seed: str | None = None) -> AnchorScan:
    """One O(n) pass: spans, completeness and fingerprint of every response. ``seed`` defaults to the
    one the Turn's ``ConversationState`` implies (``chain_seed``)."""
    if seed is None:
        seed = chain_seed(get_state(turn))
    spans: dict[str, _Span] = {}
    h = hashlib.sha256()
    blocks = turn.blocks
    n = len(blocks)
    for i, block in enumerate(blocks):
        wire = _wire(block, include_system)
        if wire is not None:
            h.update(wire)
        meta = block.metadata
        rid = meta.get(_RID)
        if not isinstance(rid, str) or not rid:
            continue
        span = spans.get(rid)
        if span is None:
            span = spans[rid] = _Span(i, i)
        else:
            span.contiguous = span.contiguous and span.last == i - 1
            span.last = i
            span.seen += 1
        if i + 1 < n and blocks[i + 1].metadata.get(_RID) == rid:
            continue  # not the end of this run of the response's blocks
        span.expected = _int(meta.get(_COUNT))
        span.refused = bool(meta.get(_REFUSED))
        recorded = meta.get(_FP)
        span.fingerprint_ok = (
            span.problem() in (None, "fingerprint_mismatch")
            and isinstance(recorded, str)
            and recorded == seal(seed, h.copy().hexdigest())
        )
    return AnchorScan(spans, h)


def find_best_anchor(turn: Turn, *, include_system: bool = True) -> str | None:
    """The latest response id that is a valid anchor, or None (send the whole Turn)."""
    return scan_anchors(turn, include_system=include_system).best()


def is_valid_anchor(turn: Turn, response_id: str, *, include_system: bool = True) -> bool:
    """True when all of ``response_id``'s blocks are there, contiguous, and its fingerprint still matches."""
    return scan_anchors(turn, include_system=include_system).valid(response_id)


def blocks_after_response(turn: Turn, response_id: str) -> list[Block]:
    """The blocks after the last block of ``response_id``; [] when there are none or it is absent."""
    for i in range(len(turn.blocks) - 1, -1, -1):
        if turn.blocks[i].metadata.get(_RID) == response_id:
            return list(turn.blocks[i + 1 :])
    return []


def tag_blocks(
    turn: Turn,
    start: int,
    response_id: str,
    *,
    include_system: bool = True,
    seed: str = "",
    prefix: Any = None,
    refused: str | None = None,
    stored: bool = True,
) -> None:
    """Stamp ``turn.blocks[start:]`` (one response's blocks) with ``response_id``, their count and the
    fingerprint at the end of the response.

    ``prefix`` is a ``prefix_hasher`` over ``turn.blocks[:start]`` when the caller has one (it is not
    changed). ``refused`` records why the response can never anchor (no fingerprint is written).
    ``stored=False`` (a response the server did not keep) writes the response id only.
    """
    new = turn.blocks[start:]
    for block in new:
        BLOCK_META_RESPONSE_ID.set(block.metadata, response_id)
    if not stored or not new:
        return
    h = prefix.copy() if prefix is not None else prefix_hasher(turn.blocks[:start], include_system=include_system)
    for block in new:
        _absorb(h, block, include_system)
    fingerprint = seal(seed, h.hexdigest())
    for block in new:
        RESPONSE_BLOCKS.set(block.metadata, len(new))
        if refused:
            ANCHOR_REFUSED.set(block.metadata, refused)
            BLOCK_META_PREFIX_FINGERPRINT.delete(block.metadata)
        else:
            BLOCK_META_PREFIX_FINGERPRINT.set(block.metadata, fingerprint)
