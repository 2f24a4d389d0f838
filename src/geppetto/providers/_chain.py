"""The anchor proof every stateful engine shares (docs/responses.md, "The proof: anchors and fingerprints").

A stateful API (OpenAI Responses with ``previous_response_id``, Gemini Interactions with
``previous_interaction_id``) keeps the conversation on the server. Every block of a stored answer carries
the answer's id (``geppetto.response_id@v1``), the number of blocks the answer produced (the engine's
count key) and the **prefix fingerprint at the end of that answer**: a digest of the canonical wire form
of every block the server then holds, sealed with the server object that holds it (the seed). An answer
is an anchor when its blocks are contiguous, all of them are still there (so its span ends on its real
last block), and the fingerprint of the Turn up to that block equals the recorded one; any insertion,
removal, reorder or edit before it, or the loss of any of its own blocks, is caught. One pass over the
blocks, O(n): each block's wire form is hashed once into one running sha256, and a digest is taken only
where an answer's run of blocks ends.

Only the wire translation differs between engines: a :class:`Wire` writes one block as the bytes its
engine's fingerprints are made of, and names the metadata keys that engine records its answers' block
counts (and refusals) under. Everything else (scan, tagging, the choice of the anchor, the reasons a
request falls back to the whole Turn, and what the inspector and OpenTelemetry read of a request) is here.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from geppetto.turns import (
    BLOCK_META_MIDDLEWARE,
    BLOCK_META_PREFIX_FINGERPRINT,
    BLOCK_META_RESPONSE_ID,
    NO_EDIT,
    Block,
    BlockList,
    FrozenBlock,
    LazyBlockList,
    Turn,
    Watch,
    seal_block,
)

from ._chain_wire import Wire, prefix_hasher, seal
from ._chain_wire import frozen_wire as _frozen_wire
from ._chain_wire import wire_form as _wire

__all__ = [
    "REASON_TEXT",
    "AnchorScan",
    "blocks_after_response",
    "chain_extra",
    "likely_edit",
    "log_candidates",
    "scan_chain",
    "scan_reusing",
    "tag_chain",
    "timed_scan",
]

REASON_TEXT = {
    "not_contiguous": "its blocks are no longer contiguous",
    "not_anchorable": "the server holds items the Turn does not replay",
    "not_tagged": "it carries no fingerprint (another provider, or store=False)",
    "response_incomplete": "some of its blocks were removed",
    "fingerprint_mismatch": "fingerprint mismatch: the Turn before its end changed, or it was answered in "
    "another chain or conversation",
}
"""Why a stored answer is not an anchor, by reason code."""

_RID, _FP = str(BLOCK_META_RESPONSE_ID), str(BLOCK_META_PREFIX_FINGERPRINT)


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
        """The reason code that keeps this answer from anchoring, or None for a valid anchor."""
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
    scan: the running digest after them, every answer's span, the latest valid anchor and the latest
    answer, and the blocks that cannot be watched (``loose``: index and wire form)."""

    seed: str
    wire: Wire
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
            self.seed, self.wire, self.hasher.copy(), dict(self.spans), self.best, self.latest, list(self.loose)
        )


@dataclass
class AnchorScan:
    """What one pass found: per answer id its span and checks; ``hasher`` covers the whole Turn.

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
        """Why the latest answer is not an anchor: a code from ``REASON_TEXT`` ("" with no answers)."""
        if self.latest_id is None:
            return ""
        return self.spans[self.latest_id].problem() or ""

    def reason(self) -> str:
        """Why there is no anchor, naming each answer, for logs."""
        if not self.spans:
            return "no block carries a response id"
        parts = [f"{rid}: {REASON_TEXT[p]}" for rid, s in self.spans.items() if (p := s.problem())]
        return "; ".join(parts) or "no valid anchor"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def scan_chain(turn: Turn, wire: Wire, *, seed: str, incremental: bool = False) -> AnchorScan:
    """Spans, completeness and fingerprint of every answer of ``turn`` under ``wire`` and ``seed``.

    One O(n) pass; with ``incremental`` (an engine's stateful requests) the blocks are sealed
    (``geppetto.turns._watch``) and what was proven is kept with the Turn, so the next scan reads only the
    blocks after the proven ones, O(new blocks), unless a change touched the proven blocks (an edit,
    insertion, removal or reorder before the end of the proof; an answer id seen again; another seed or
    wire): then it reads the whole Turn again.
    """
    blocks = turn.blocks
    if not incremental or not isinstance(blocks, BlockList):
        proof = _Proof(seed, wire)
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
        and proof.wire is wire
        and all(wire.fresh(blocks[i]) == data for i, data in proof.loose)
        and _advance(blocks, start, proof, watch)
    ):
        proof, start = _Proof(seed, wire), 0
        _advance(blocks, 0, proof, watch)
    watch.state, watch.k, blocks.low = proof, n, NO_EDIT
    return _result(proof, rescanned=start == 0, hashed=n - start)


def scan_reusing(turn: Turn, wire: Wire, *, seed: str) -> AnchorScan:
    """The scan a caller outside the engine makes (``find_best_anchor``, ``is_valid_anchor``): when the Turn
    holds an engine's proof under the same wire form and seed, that proof is extended as the engine's next
    request would extend it (O(new blocks)); otherwise one pass that keeps nothing and changes no block."""
    blocks = turn.blocks
    watch = blocks.watch if isinstance(blocks, BlockList) else None
    proof = watch.state if watch is not None else None
    if isinstance(proof, _Proof) and proof.wire is wire and proof.seed == seed:
        return scan_chain(turn, wire, seed=seed, incremental=True)
    return scan_chain(turn, wire, seed=seed)


def _advance(blocks: list[Block], start: int, proof: _Proof, watch: Watch | None) -> bool:
    """Read ``blocks[start:]`` into ``proof`` (sealing them for ``watch``). False when a block belongs to
    an answer seen before ``start``: the proof cannot be extended, read the whole Turn."""
    spans, h, wire, seed = proof.spans, proof.hasher, proof.wire, proof.seed
    count_key, refused_key = wire.count_key, wire.refused_key
    touched: list[str] = []
    n = len(blocks)
    lazy = isinstance(blocks, LazyBlockList)
    for i in range(start, n):
        block = list.__getitem__(blocks, i) if lazy else blocks[i]
        if lazy and type(block) is FrozenBlock:
            # A version shared with stored snapshots stays as it is: nobody holds it, and a read of it
            # later gets a copy (sealed for this watch, if any: LazyBlockList._read), so a proof still sees
            # any change. Its wire form is remembered on it, and handed to that copy. Without a watch,
            # thawing every block only to read it would copy the whole Turn (and feed the collector).
            loose, data = False, _frozen_wire(block, wire)
        else:
            loose = watch is not None and seal_block(block, watch).loose
            data = _wire(block, wire)
        if loose:
            proof.loose.append((i, data))  # re-checked on every scan
        if data is not None:
            h.update(data)
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
            continue  # not the end of this run of the answer's blocks
        span.expected = _int(meta.get(count_key))
        span.refused = bool(meta.get(refused_key))
        recorded = meta.get(_FP)
        span.fingerprint_ok = (
            span.problem() in (None, "fingerprint_mismatch")
            and isinstance(recorded, str)
            and recorded == seal(seed, h.copy().hexdigest())
        )
    _settle(spans, touched, proof)
    return True


def _settle(spans: dict[str, _Span], touched: list[str], proof: _Proof) -> None:
    for rid in touched:
        span = spans[rid]
        if proof.latest is None or span.last > spans[proof.latest].last:
            proof.latest = rid
        if span.problem() is None and (proof.best is None or span.last > spans[proof.best].last):
            proof.best = rid


def _result(proof: _Proof, *, rescanned: bool, hashed: int) -> AnchorScan:
    return AnchorScan(proof.spans, proof.hasher.copy(), proof.best, proof.latest, rescanned, hashed)


def likely_edit(turn: Turn) -> tuple[int, Block, str] | None:
    """``(index, block, middleware)`` of the block that most likely broke the proof of a Turn whose latest
    response no longer matches: the last block up to that response's end that a middleware says it made or
    edited (``geppetto.middleware@v1``). The fingerprint says only that something before the end changed;
    the middleware's mark says who. None when no such block is marked."""
    blocks = turn.blocks
    last = max((i for i, b in enumerate(blocks) if BLOCK_META_RESPONSE_ID.get(b.metadata)), default=-1)
    for i in range(last, -1, -1):
        name = BLOCK_META_MIDDLEWARE.get(blocks[i].metadata)
        if name:
            return i, blocks[i], name
    return None


def blocks_after_response(turn: Turn, response_id: str) -> list[Block]:
    """The blocks after the last block of ``response_id``; [] when there are none or it is absent."""
    for i in range(len(turn.blocks) - 1, -1, -1):
        if turn.blocks[i].metadata.get(_RID) == response_id:
            return list(turn.blocks[i + 1 :])
    return []


def tag_chain(
    turn: Turn,
    start: int,
    response_id: str,
    wire: Wire,
    *,
    seed: str = "",
    prefix: Any = None,
    refused: str | None = None,
    stored: bool = True,
    log: logging.Logger,
    label: str,
) -> None:
    """Stamp ``turn.blocks[start:]`` (one answer's blocks) with ``response_id``, their count and the
    fingerprint at the end of the answer.

    ``prefix`` is a :func:`prefix_hasher` over ``turn.blocks[:start]`` when the caller has one (it is not
    changed). ``refused`` records why the answer can never anchor (no fingerprint is written).
    ``stored=False`` (an answer the server did not keep) writes the answer id only. ``log`` and ``label``
    are the engine's logger and the prefix of its lines.
    """
    new = turn.blocks[start:]
    for block in new:
        BLOCK_META_RESPONSE_ID.set(block.metadata, response_id)
    log.debug(
        "%s: tagged %d blocks with response_id %s%s",
        label,
        len(new),
        response_id,
        "" if stored and not refused else f" ({'not anchorable: ' + refused if refused else 'not stored'})",
    )
    if not stored or not new:
        return
    h = prefix.copy() if prefix is not None else prefix_hasher(turn.blocks[:start], wire)
    for block in new:
        data = _wire(block, wire)
        if data is not None:
            h.update(data)
    fingerprint = seal(seed, h.hexdigest())
    for block in new:
        block.metadata[wire.count_key] = len(new)
        if refused:
            block.metadata[wire.refused_key] = refused
            BLOCK_META_PREFIX_FINGERPRINT.delete(block.metadata)
        else:
            BLOCK_META_PREFIX_FINGERPRINT.set(block.metadata, fingerprint)


def timed_scan(run: Callable[[], AnchorScan], metrics: Any, *, log: logging.Logger, label: str) -> AnchorScan:
    """The scan ``run`` makes, its time recorded in ``metrics`` (``anchor_time``; None records nothing) and
    its candidates logged at DEBUG."""
    start = time.perf_counter()
    scan = run()
    if metrics is not None:
        metrics.anchor_time(time.perf_counter() - start)
    if log.isEnabledFor(logging.DEBUG):
        log_candidates(scan, log=log, label=label)
    return scan


def log_candidates(scan: AnchorScan, *, log: logging.Logger, label: str) -> None:
    """One DEBUG line per answer of the Turn: taken as the anchor, passed over for a later one, or why not."""
    if not scan.spans:
        log.debug("%s: anchor candidates: none (no block carries a response id)", label)
    for rid, span in reversed(scan.spans.items()):
        problem = span.problem()
        if problem is not None:
            verdict = f"rejected: {REASON_TEXT[problem]} ({problem})"
        elif rid == scan.best_id:
            verdict = "valid: the anchor"
        else:
            verdict = f"valid, but {scan.best_id} ends later"
        log.debug("%s: anchor candidate %s (blocks %d-%d): %s", label, rid, span.first, span.last, verdict)


def chain_extra(
    *,
    mode: str,
    anchor: str,
    items: int,
    full: bool,
    fallback: str,
    detail: str,
    sent: list[Block],
    why: str = "",
) -> dict[str, Any]:
    """What a stateful request reports in its final event's ``extra`` (the web inspector, ``geppetto
    inspect`` and the OpenTelemetry span attributes read these keys): how it carried the context, the
    anchor, the input items, whether they were the whole Turn, the fallback reason and why, and the ids of
    a delta's blocks (None for a whole-Turn request), and why this anchor or repair was chosen (``why``;
    the detail when the plan gave none)."""
    return {
        "responses.mode": mode,
        "responses.anchor": anchor,
        "responses.items": items,
        "responses.full": full,
        "responses.fallback": fallback,
        "responses.detail": detail,
        "responses.sent": None if full else [b.id for b in sent],
        "responses.why": why or detail,
    }
