"""The wire side of the anchor proof (:mod:`geppetto.providers._chain`): how an engine writes a block into its
fingerprints (:class:`Wire`), the wire form a sealed or frozen block remembers, the running digest of a
prefix and the seal that binds a digest to the server object holding it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from geppetto.turns import (
    BLOCK_META_PREFIX_FINGERPRINT,
    BLOCK_META_RESPONSE_ID,
    Block,
    FrozenBlock,
    seal_of,
    watch_metadata_keys,
)

__all__ = ["Wire", "block_wire", "frozen_wire", "prefix_hasher", "seal", "wire_form"]


class Wire:
    """How one engine writes a block into its fingerprints.

    ``count_key`` / ``refused_key`` are the block metadata keys (``str`` of a ``block_meta_key``) under which
    that engine records how many blocks an answer produced and why an answer can never anchor; an answer
    tagged by another engine has no count under this engine's key, so it never anchors here. A block's
    wire form is remembered in its seal under the ``Wire`` object itself: keep one instance per encoding."""

    def __init__(self, count_key: str, refused_key: str) -> None:
        self.count_key, self.refused_key = count_key, refused_key
        # what a sealed block's proof depends on
        watch_metadata_keys(str(BLOCK_META_RESPONSE_ID), str(BLOCK_META_PREFIX_FINGERPRINT), count_key, refused_key)

    def fresh(self, block: Block) -> bytes | None:
        """The canonical wire form of ``block`` (None when the block is never sent)."""
        raise NotImplementedError


def seal(seed: str, digest: str) -> str:
    """The fingerprint recorded for a Turn prefix whose wire digest is ``digest``, under ``seed``."""
    return hashlib.sha256(f"{seed}\n{digest}".encode()).hexdigest() if seed else digest


def wire_form(block: Block, wire: Wire) -> bytes | None:
    """The wire form of ``block``: a sealed block remembers it (until a change of the block forgets it)."""
    held = seal_of(block)
    if held is not None and not held.loose:
        if held.key is wire:
            kept: bytes | None = held.wire
            return kept
        held.wire = made = wire.fresh(block)
        held.key = wire
        return made
    return wire.fresh(block)


def block_wire(block: Block, wire: Wire) -> bytes | None:
    """The wire form of ``block`` under ``wire``, as the fingerprints read it (remembered in a sealed block's
    seal): what the prefix guard digests."""
    return wire_form(block, wire)


def frozen_wire(block: FrozenBlock, wire: Wire) -> bytes | None:
    """The wire form of a frozen (copy-on-write) block, remembered in the block itself under ``wire``."""
    d = block.__dict__
    if d.get("key") is wire:
        kept: bytes | None = d["wire"]
        return kept
    d["wire"] = made = wire.fresh(block)
    d["key"] = wire
    return made


def prefix_hasher(blocks: Iterable[Block], wire: Wire) -> Any:
    """A running sha256 over the wire form of ``blocks`` (copy it before adding more)."""
    h = hashlib.sha256()
    for block in blocks:
        data = wire_form(block, wire)
        if data is not None:
            h.update(data)
    return h
