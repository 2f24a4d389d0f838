"""Anchor selection for the Responses engine: its wire form of a block, on the shared proof.

The proof itself (spans, fingerprints, incremental scans, tagging) is :mod:`geppetto.providers._chain`,
shared with the Gemini Interactions engine; this module is the Responses side of it: the canonical wire
form of a block as an input item, the seed a Turn's ``ConversationState`` implies, and the names the
Responses engine and its tests have always used.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from geppetto.turns import (
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

from .._chain import REASON_TEXT, AnchorScan, Wire, blocks_after_response, scan_chain, scan_reusing, seal, tag_chain
from .._chain import prefix_hasher as _hasher
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
    "wire_for",
]

ANCHOR_REFUSED = block_meta_key("openai", "not_anchorable", 1, str)
"""``openai.not_anchorable@v1``: why a stored response can never be an anchor (the server holds an item
the Turn does not replay, e.g. a function call cut off by ``max_output_tokens``)."""

log = logging.getLogger("geppetto.providers.openai_responses")

_CANON = compact_json(sort_keys=True)
_STR = json.encoder.encode_basestring  # a JSON string as _CANON writes one (ensure_ascii=False)


class _ResponsesWire(Wire):
    """A block as a Responses input item (system blocks included or not)."""

    def __init__(self, include_system: bool) -> None:
        super().__init__(str(RESPONSE_BLOCKS), str(ANCHOR_REFUSED))
        self.include_system = include_system

    def fresh(self, block: Block) -> bytes | None:
        return _fresh_wire(block, self.include_system)


_WIRES = {True: _ResponsesWire(True), False: _ResponsesWire(False)}


def wire_for(include_system: bool) -> Wire:
    """The Responses wire form, with or without system blocks (one object each: seals remember it)."""
    return _WIRES[bool(include_system)]


def chain_seed(state: ConversationState | None, mode: str | None = None) -> str:
    """What holds the context before the Turn's first block, folded into every fingerprint.

    ``""`` when the Turn holds the whole context of a chain; ``after:<id>`` for a fresh Turn continuing
    response ``<id>``; ``conversation:<id>`` in conversation mode (the conversation holds the context).
    """
    mode = mode or (state.mode if state else "chained")
    if mode == "conversation":
        return f"conversation:{state.conversation_id if state and state.conversation_id else ''}"
    return f"after:{state.base}" if state and state.base else ""


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


def prefix_hasher(blocks: Iterable[Block], *, include_system: bool = True) -> Any:
    """A running sha256 over the wire form of ``blocks`` (copy it before adding more)."""
    return _hasher(blocks, wire_for(include_system))


def prefix_fingerprint(blocks: Iterable[Block], *, include_system: bool = True, seed: str = "") -> str:
    """The fingerprint of a Turn whose first blocks are ``blocks``."""
    return seal(seed, prefix_hasher(blocks, include_system=include_system).hexdigest())


def scan_anchors(
    turn: Turn, *, include_system: bool = True, seed: str | None = None, incremental: bool = False
) -> AnchorScan:
    """Spans, completeness and fingerprint of every response (:func:`geppetto.providers._chain.scan_chain`
    with the Responses wire form). ``seed`` defaults to the one the Turn's ``ConversationState`` implies
    (``chain_seed``); ``incremental`` keeps the proof with the Turn (the engine's stateful requests)."""
    if seed is None:
        seed = chain_seed(get_state(turn))
    return scan_chain(turn, wire_for(include_system), seed=seed, incremental=incremental)


def _reusing(turn: Turn, include_system: bool) -> AnchorScan:
    return scan_reusing(turn, wire_for(include_system), seed=chain_seed(get_state(turn)))


def find_best_anchor(turn: Turn, *, include_system: bool = True) -> str | None:
    """The latest response id that is a valid anchor, or None (send the whole Turn). On a Turn the engine
    proved it reads only the blocks added since (the engine's own proof, extended); on a Turn just loaded
    it reads each stored block in place."""
    return _reusing(turn, include_system).best()


def is_valid_anchor(turn: Turn, response_id: str, *, include_system: bool = True) -> bool:
    """True when all of ``response_id``'s blocks are there, contiguous, and its fingerprint still matches."""
    return _reusing(turn, include_system).valid(response_id)


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
    fingerprint at the end of the response (:func:`geppetto.providers._chain.tag_chain`).

    ``prefix`` is a ``prefix_hasher`` over ``turn.blocks[:start]`` when the caller has one (it is not
    changed). ``refused`` records why the response can never anchor (no fingerprint is written).
    ``stored=False`` (a response the server did not keep) writes the response id only.
    """
    tag_chain(
        turn,
        start,
        response_id,
        wire_for(include_system),
        seed=seed,
        prefix=prefix,
        refused=refused,
        stored=stored,
        log=log,
        label="responses",
    )
