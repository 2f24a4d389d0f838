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
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from geppetto.turns import (
    BLOCK_META_PREFIX_FINGERPRINT,
    BLOCK_META_RESPONSE_ID,
    PAYLOAD_ARGS,
    PAYLOAD_ID,
    PAYLOAD_ITEM_ID,
    PAYLOAD_NAME,
    PAYLOAD_RESULT,
    PAYLOAD_TEXT,
    Block,
    BlockKind,
    Turn,
    block_meta_key,
)
from geppetto.turns._cow import FrozenBlock, LazyBlockList
from geppetto.turns._model import seal_block, seal_of
from geppetto.turns._watch import NO_EDIT, BlockList, Watch, watch_metadata_keys

from ._items import RESPONSE_BLOCKS, arguments_text, block_identity, compact_json, tool_output_text
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

log = logging.getLogger("geppetto.providers.openai_responses")

_CANON = compact_json(sort_keys=True)
_STR = json.encoder.encode_basestring  # a JSON string as _CANON writes one (ensure_ascii=False)
_RID, _FP = str(BLOCK_META_RESPONSE_ID), str(BLOCK_META_PREFIX_FINGERPRINT)
_COUNT, _REFUSED = str(RESPONSE_BLOCKS), str(ANCHOR_REFUSED)
watch_metadata_keys(_RID, _FP, _COUNT, _REFUSED)  # what a sealed block's proof depends on besides its wire form


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


def _wire(block: Block, include_system: bool) -> bytes | None:
    """The canonical wire form of ``block`` as it goes into fingerprints, None when it is never sent.

    A sealed block remembers it (in its seal, until a change of the block forgets it); any other block
    makes it again."""
    held = seal_of(block)
    if held is not None and not held.loose:
        if held.key is include_system:
            wire: bytes | None = held.wire
            return wire
        held.wire = wire = _fresh_wire(block, include_system)
        held.key = include_system
        return wire
    return _fresh_wire(block, include_system)


def _frozen_wire(block: FrozenBlock, include_system: bool) -> bytes | None:
    d = block.__dict__
    if d.get("key") is include_system:
        wire: bytes | None = d["wire"]
        return wire
    d["wire"] = wire = _fresh_wire(block, include_system)
    d["key"] = include_system
    return wire


def _fresh_wire(block: Block, include_system: bool) -> bytes | None:
    """``_CANON(block_identity(block)) + "\\n"`` as UTF-8. A plain block (a text message, a function call, a
    tool result, holding only the payload fields its wire item is made of) is written straight from its
    fields, byte for byte what the encoder makes of its identity (``tests/responses/test_anchor_wire.py``
    holds them equal), since a Turn just loaded makes every block's wire form at once and the encoder's
    generic walk was most of that cost. A block with any other payload field (a phase, images, an error)
    goes the general way, so a field added to the wire item later can never be left out here."""
    payload = block.payload
    kind = block.kind
    keys = payload.keys()
    if kind is BlockKind.TOOL_USE:
        call = payload.get(PAYLOAD_ID)
        if keys <= _PLAIN_TOOL_USE and call:
            output = tool_output_text(block)
            return f'{{"call_id":{_STR(str(call))},"output":{_STR(output)},"type":"function_call_output"}}\n'.encode()
    elif kind is BlockKind.TOOL_CALL:
        call, name = payload.get(PAYLOAD_ID), payload.get(PAYLOAD_NAME)
        if keys <= _PLAIN_TOOL_CALL and call and name:
            args = arguments_text(payload.get(PAYLOAD_ARGS))
            return (
                f'{{"arguments":{_STR(args)},"call_id":{_STR(str(call))},"name":{_STR(str(name))},'
                '"type":"function_call"}\n'
            ).encode()
    elif kind is BlockKind.LLM_TEXT:
        text = payload.get(PAYLOAD_TEXT)
        if keys <= _PLAIN_LLM_TEXT and type(text) is str:
            return f'{{"content":{_STR(text)},"role":"assistant"}}\n'.encode() if text.strip() else None
    elif kind is BlockKind.USER or (kind is BlockKind.SYSTEM and include_system):
        text = payload.get(PAYLOAD_TEXT)
        if keys <= _PLAIN_MESSAGE and type(text) is str:
            role = "user" if kind is BlockKind.USER else ("developer" if block.role == "developer" else "system")
            return f'{{"content":{_STR(text)},"role":"{role}"}}\n'.encode()
    identity = block_identity(block, include_system=include_system)
    return None if identity is None else (_CANON(identity) + "\n").encode()


_PLAIN_MESSAGE = frozenset({PAYLOAD_TEXT})
_PLAIN_LLM_TEXT = frozenset({PAYLOAD_TEXT, PAYLOAD_ITEM_ID})
_PLAIN_TOOL_CALL = frozenset({PAYLOAD_ID, PAYLOAD_NAME, PAYLOAD_ARGS, PAYLOAD_ITEM_ID})
_PLAIN_TOOL_USE = frozenset({PAYLOAD_ID, PAYLOAD_RESULT})
"""The payload fields of the plain blocks whose wire form ``_fresh_wire`` writes itself: exactly the ones
their wire identity is made of (an item id is not part of it)."""


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


@dataclass(slots=True)
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
class _Proof:
    """What a scan found about blocks ``[0, k)`` of one Turn (``k`` is its watch's), kept for the next
    scan: the running digest after them, every response's span, the latest valid anchor and the latest
    response, and the blocks that cannot be watched (``loose``: index and wire form)."""

    seed: str
    include_system: bool
    hasher: Any = field(default_factory=hashlib.sha256)
    spans: dict[str, _Span] = field(default_factory=dict)
    best: str | None = None
    latest: str | None = None
    loose: list[tuple[int, bytes | None]] = field(default_factory=list)

    def copy(self) -> _Proof:
        """The proof for a copy of the Turn (``Turn.clone``). The spans are shared: ``_advance`` changes only
        spans it made itself (one seen again from before its start ends the pass), so a span copied here
        is never changed again by either proof; the map is the copy's own."""
        return _Proof(
            self.seed,
            self.include_system,
            self.hasher.copy(),
            dict(self.spans),
            self.best,
            self.latest,
            list(self.loose),
        )


@dataclass
class AnchorScan:
    """What one pass found: per response id its span and checks; ``hasher`` covers the whole Turn.

    ``rescanned`` is True when the pass read the whole Turn, False when an earlier proof of its first
    blocks held and only the blocks after them were read (``hashed`` counts the blocks read)."""

    spans: dict[str, _Span]
    hasher: Any = field(default=None, repr=False)
    best_id: str | None = None
    latest_id: str | None = None
    rescanned: bool = True
    hashed: int = 0

    def valid(self, response_id: str) -> bool:
        span = self.spans.get(response_id)
        return span is not None and span.problem() is None

    def best(self) -> str | None:
        return self.best_id

    def reason_code(self) -> str:
        """Why the latest response is not an anchor: a code from ``REASON_TEXT`` ("" with no responses)."""
        if self.latest_id is None:
            return ""
        return self.spans[self.latest_id].problem() or ""

    def reason(self) -> str:
        """Why there is no anchor, naming each response, for logs."""
        if not self.spans:
            return "no block carries a response id"
        parts = [f"{rid}: {REASON_TEXT[p]}" for rid, s in self.spans.items() if (p := s.problem())]
        return "; ".join(parts) or "no valid anchor"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def scan_anchors(
    turn: Turn, *, include_system: bool = True, seed: str | None = None, incremental: bool = False
) -> AnchorScan:
    """Spans, completeness and fingerprint of every response. ``seed`` defaults to the one the Turn's
    ``ConversationState`` implies (``chain_seed``).

    One O(n) pass; with ``incremental`` (the engine's chained and conversation requests) the blocks
    are sealed (``geppetto.turns._watch``) and what was proven is kept with the Turn, so the next scan
    reads only the blocks after the proven ones, O(new blocks), unless a change touched the proven
    blocks (an edit, insertion, removal or reorder before the end of the proof; a response id seen
    again; another seed): then it reads the whole Turn again.
    """
    if seed is None:
        seed = chain_seed(get_state(turn))
    blocks = turn.blocks
    if not incremental or not isinstance(blocks, BlockList):
        proof = _Proof(seed, include_system)
        _advance(blocks, 0, proof, None)
        return _result(proof, rescanned=True, hashed=len(blocks))
    held = blocks.held()
    watch = blocks.watch = blocks.watch or Watch()
    proof, start, n = watch.state, watch.k, len(blocks)
    watch.dirty = False
    if not (
        held is not None
        and isinstance(proof, _Proof)
        and proof.seed == seed
        and proof.include_system is include_system
        and all(_fresh_wire(blocks[i], include_system) == wire for i, wire in proof.loose)
        and _advance(blocks, start, proof, watch)
    ):
        proof, start = _Proof(seed, include_system), 0
        _advance(blocks, 0, proof, watch)
    watch.state, watch.k, blocks.low = proof, n, NO_EDIT
    return _result(proof, rescanned=start == 0, hashed=n - start)


def _advance(blocks: list[Block], start: int, proof: _Proof, watch: Watch | None) -> bool:
    """Read ``blocks[start:]`` into ``proof`` (sealing them for ``watch``). False when a block belongs to
    a response seen before ``start``: the proof cannot be extended, read the whole Turn."""
    spans, h, include_system, seed = proof.spans, proof.hasher, proof.include_system, proof.seed
    touched: list[str] = []
    n = len(blocks)
    lazy = watch is not None and isinstance(blocks, LazyBlockList)
    for i in range(start, n):
        block = list.__getitem__(blocks, i) if lazy else blocks[i]
        if lazy and type(block) is FrozenBlock:
            # A version shared with stored snapshots stays as it is: nobody holds it, and a read of it
            # later gets a copy sealed for this watch (LazyBlockList._read), so the proof still sees any
            # change. Its wire form is remembered on it, and handed to that copy.
            loose, wire = False, _frozen_wire(block, include_system)
        else:
            loose = watch is not None and seal_block(block, watch).loose
            wire = _wire(block, include_system)
        if loose:
            proof.loose.append((i, wire))  # re-checked on every scan
        if wire is not None:
            h.update(wire)
        meta = block.metadata
        rid = meta.get(_RID)
        if not isinstance(rid, str) or not rid:
            continue
        span = spans.get(rid)
        if span is None:
            span = spans[rid] = _Span(i, i)
            touched.append(rid)
        elif span.first < start:
            return False
        else:
            span.contiguous = span.contiguous and span.last == i - 1
            span.last = i
            span.seen += 1
        if i + 1 < n and list.__getitem__(blocks, i + 1).metadata.get(_RID) == rid:  # a look, not a read
            continue  # not the end of this run of the response's blocks
        span.expected = _int(meta.get(_COUNT))
        span.refused = bool(meta.get(_REFUSED))
        recorded = meta.get(_FP)
        span.fingerprint_ok = (
            span.problem() in (None, "fingerprint_mismatch")
            and isinstance(recorded, str)
            and recorded == seal(seed, h.copy().hexdigest())
        )
    for rid in touched:
        span = spans[rid]
        if proof.latest is None or span.last > spans[proof.latest].last:
            proof.latest = rid
        if span.problem() is None and (proof.best is None or span.last > spans[proof.best].last):
            proof.best = rid
    return True


def _result(proof: _Proof, *, rescanned: bool, hashed: int) -> AnchorScan:
    return AnchorScan(proof.spans, proof.hasher.copy(), proof.best, proof.latest, rescanned, hashed)


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
    log.debug(
        "responses: tagged %d blocks with response_id %s%s",
        len(new),
        response_id,
        "" if stored and not refused else f" ({'not anchorable: ' + refused if refused else 'not stored'})",
    )
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
