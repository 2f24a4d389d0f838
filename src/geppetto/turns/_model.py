"""Turn, Block and BlockKind: the provider-neutral conversation.

A :class:`Turn` is an ordered list of :class:`Block` values plus turn-level metadata and data. Blocks
are plain data: a kind, a role, a JSON payload and typed metadata. Every engine reads and appends
blocks; nothing else about a provider leaks into the model.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ._attach import attachments, place_attachments
from ._keys import BlockMetadata, TurnData, TurnMetadata, copy_json
from ._watch import BlockList, Seal, Watch, watch_metadata, watched

__all__ = [
    "PAYLOAD_ARGS",
    "PAYLOAD_ENCRYPTED_CONTENT",
    "PAYLOAD_ERROR",
    "PAYLOAD_ID",
    "PAYLOAD_IMAGES",
    "PAYLOAD_ITEM_ID",
    "PAYLOAD_NAME",
    "PAYLOAD_RESULT",
    "PAYLOAD_SIGNATURE",
    "PAYLOAD_SUMMARY",
    "PAYLOAD_TEXT",
    "PAYLOAD_THOUGHT_SIGNATURE",
    "Block",
    "BlockKind",
    "Turn",
    "copy_json",
    "new_id",
    "seal_block",
    "seal_of",
]

PAYLOAD_TEXT = "text"
PAYLOAD_ID = "id"  # tool call id, shared by a tool_call and its tool_use
PAYLOAD_NAME = "name"
PAYLOAD_ARGS = "args"
PAYLOAD_RESULT = "result"
PAYLOAD_ERROR = "error"
PAYLOAD_IMAGES = "images"
PAYLOAD_ITEM_ID = "item_id"  # the provider's item id; never Block.id
PAYLOAD_ENCRYPTED_CONTENT = "encrypted_content"
PAYLOAD_SUMMARY = "summary"
PAYLOAD_SIGNATURE = "signature"  # Anthropic thinking signature
PAYLOAD_THOUGHT_SIGNATURE = "thought_signature"  # Gemini


class BlockKind(enum.StrEnum):
    """What a block is. Unknown kinds read leniently become ``OTHER``."""

    SYSTEM = "system"
    USER = "user"
    LLM_TEXT = "llm_text"
    TOOL_CALL = "tool_call"
    TOOL_USE = "tool_use"
    REASONING = "reasoning"
    OTHER = "other"

    def __str__(self) -> str:
        return self.value


_DEFAULT_ROLE = {
    BlockKind.SYSTEM: "system",
    BlockKind.USER: "user",
    BlockKind.LLM_TEXT: "assistant",
    BlockKind.TOOL_CALL: "assistant",
    BlockKind.TOOL_USE: "tool",
    BlockKind.REASONING: "assistant",
    BlockKind.OTHER: "",
}


def new_id() -> str:
    """A fresh block or turn id (a UUID4 string, as ``str(uuid.uuid4())`` makes, without the uuid module's
    import and objects)."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass(eq=False)
class Block:
    """One element of a conversation.

    ``id`` identifies the block itself; ``turn_id`` names the turn snapshot that created it (stamped on
    append, never rewritten); ``payload`` holds the kind's fields (see the ``PAYLOAD_*`` names);
    ``metadata`` holds typed provenance (see :class:`~geppetto.turns.Key`).
    """

    kind: BlockKind
    payload: dict[str, Any] = field(default_factory=dict)
    role: str = ""
    id: str = field(default_factory=new_id)
    turn_id: str = ""
    metadata: BlockMetadata = field(default_factory=BlockMetadata)

    def __post_init__(self) -> None:
        if type(self.kind) is not BlockKind:
            self.kind = BlockKind(self.kind)  # accepts the kind's text too
        if not self.role:
            self.role = _DEFAULT_ROLE[self.kind]
        if type(self.metadata) is not BlockMetadata:
            self.metadata = BlockMetadata(self.metadata)

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def system(cls, text: str) -> Block:
        return cls(BlockKind.SYSTEM, {PAYLOAD_TEXT: text})

    @classmethod
    def user(cls, text: str, images: list[dict[str, Any]] | None = None, files: Iterable[Any] | None = None) -> Block:
        """A user's message. ``images`` are image dicts; ``files`` are attachments: paths read inline
        (``"report.pdf"``) or dicts with a ``media_type`` and one of ``url``, ``data`` (base64) or
        ``file_id`` (see :mod:`geppetto.turns._files`); images among them join ``images``."""
        payload: dict[str, Any] = {PAYLOAD_TEXT: text}
        if images:
            payload[PAYLOAD_IMAGES] = images
        if files:
            place_attachments(payload, attachments(files))
        return cls(BlockKind.USER, payload)

    @classmethod
    def llm_text(cls, text: str, *, item_id: str | None = None) -> Block:
        payload: dict[str, Any] = {PAYLOAD_TEXT: text}
        if item_id:
            payload[PAYLOAD_ITEM_ID] = item_id
        return cls(BlockKind.LLM_TEXT, payload)

    @classmethod
    def tool_call(cls, id: str, name: str, args: Any, *, item_id: str | None = None) -> Block:
        """A model's request to run tool ``name``. ``args`` is a dict, or the raw string the model sent
        when it was not valid JSON (the tool loop turns that into an error the model sees)."""
        payload: dict[str, Any] = {PAYLOAD_ID: id, PAYLOAD_NAME: name, PAYLOAD_ARGS: args}
        if item_id:
            payload[PAYLOAD_ITEM_ID] = item_id
        return cls(BlockKind.TOOL_CALL, payload)

    @classmethod
    def tool_use(cls, id: str, result: Any, error: str | None = None) -> Block:
        """The result of tool call ``id``; ``error`` says what went wrong, and the model sees it."""
        payload: dict[str, Any] = {PAYLOAD_ID: id, PAYLOAD_RESULT: result}
        if error is not None:
            payload[PAYLOAD_ERROR] = error
        return cls(BlockKind.TOOL_USE, payload)

    @classmethod
    def reasoning(
        cls,
        text: str | None = None,
        *,
        item_id: str | None = None,
        encrypted_content: str | None = None,
        summary: list[str] | None = None,
        signature: str | None = None,
    ) -> Block:
        payload: dict[str, Any] = {}
        for key, value in (
            (PAYLOAD_TEXT, text),
            (PAYLOAD_ITEM_ID, item_id),
            (PAYLOAD_ENCRYPTED_CONTENT, encrypted_content),
            (PAYLOAD_SUMMARY, summary),
            (PAYLOAD_SIGNATURE, signature),
        ):
            if value is not None:
                payload[key] = value
        return cls(BlockKind.REASONING, payload)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Block):
            return NotImplemented
        return (
            self.kind == other.kind
            and self.role == other.role
            and self.id == other.id
            and self.turn_id == other.turn_id
            and self.payload == other.payload
            and self.metadata == other.metadata
        )

    __hash__ = None  # type: ignore[assignment]

    # -- helpers ------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """The block's text, or ``""``."""
        value = self.payload.get(PAYLOAD_TEXT)
        return value if isinstance(value, str) else ""

    def copy(self) -> Block:
        """A deep copy with the same id and stamps."""
        return Block(
            kind=self.kind,
            payload=copy_json(self.payload),
            role=self.role,
            id=self.id,
            turn_id=self.turn_id,
            metadata=BlockMetadata(copy_json(dict(self.metadata))),
        )


@dataclass(eq=True)
class Turn:
    """An ordered list of blocks with turn-level ``metadata`` (facts about the inference) and ``data``
    (configuration that travels with the turn)."""

    blocks: list[Block] = field(default_factory=list)
    id: str = field(default_factory=new_id)
    metadata: TurnMetadata = field(default_factory=TurnMetadata)
    data: TurnData = field(default_factory=TurnData)

    def __post_init__(self) -> None:
        if type(self.metadata) is not TurnMetadata:
            self.metadata = TurnMetadata(self.metadata)
        if type(self.data) is not TurnData:
            self.data = TurnData(self.data)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "blocks" and not getattr(value, "adopt", False):
            value = BlockList(value)  # the Turn's own list, which remembers edits (see _watch)
        object.__setattr__(self, name, value)

    def append(self, block: Block) -> Block:
        """Append ``block``, giving it this turn's id if it has no ``turn_id`` yet. Returns the block."""
        if not block.turn_id:
            block.turn_id = self.id
        self.blocks.append(block)
        return block

    def extend(self, blocks: Iterable[Block]) -> None:
        for block in blocks:
            self.append(block)

    def insert(self, index: int, block: Block) -> Block:
        """Insert ``block`` at ``index``, stamping an empty ``turn_id`` like :meth:`append`."""
        if not block.turn_id:
            block.turn_id = self.id
        self.blocks.insert(index, block)
        return block

    def clone(self, *, keep_proof: bool = True) -> Turn:
        """A copy whose blocks, payloads and maps can be edited without touching this turn.

        What a reader proved about this turn's first blocks (the Responses engine's anchor check) holds
        for the copy too: those blocks are copied sealed, and the proof comes along (see ``_watch``), so
        the next request on the copy reads only its new blocks. ``keep_proof=False`` makes plain copies
        (a snapshot to store, which is never sent again as it is).
        """
        turn = Turn(
            id=self.id,
            metadata=TurnMetadata(copy_json(dict(self.metadata))),
            data=TurnData(copy_json(dict(self.data))),
        )
        blocks, copied = self.blocks, turn.blocks
        watch = blocks.held() if keep_proof and isinstance(blocks, BlockList) else None
        if getattr(blocks, "adopt", False):  # a copy-on-write list: share its versions, copy nothing yet
            carried = Watch(watch.state.copy(), watch.k) if watch is not None and hasattr(watch.state, "copy") else None
            turn.blocks = blocks.shared_copy(carried)  # type: ignore[attr-defined]
            return turn
        if watch is None or not hasattr(watch.state, "copy") or not isinstance(copied, BlockList):
            copied.extend(b.copy() for b in blocks)
            return turn
        k = watch.k
        new = copied.watch = Watch(watch.state.copy(), k)
        copied.extend(_sealed_copy(b, new) for b in blocks[:k])
        copied.extend(b.copy() for b in blocks[k:])
        return turn

    def find(self, kind: BlockKind) -> list[Block]:
        """The blocks of one kind, in order."""
        return [b for b in self.blocks if b.kind is kind]


class _SealedBlock(Block):
    """A block a reader sealed (its class switched in place): a change of kind, role, payload or
    metadata is reported to its :class:`~geppetto.turns._watch.Seal`."""

    __hash__ = None

    def __setattr__(self, name: str, value: Any) -> None:
        seal = seal_of(self)
        if seal is not None and name in _SEALED_FIELDS:
            if name == "payload":
                value = watched(value, seal)
            elif name == "metadata":
                value = watch_metadata(value if type(value) is BlockMetadata else BlockMetadata(value), seal)
            elif name == "kind":
                value = BlockKind(value)
            if value is not self.__dict__.get(name):
                seal.touch()
        object.__setattr__(self, name, value)

    def __reduce_ex__(self, protocol: Any) -> Any:  # copies and pickles are plain blocks
        return (Block, (self.kind, self.payload, self.role, self.id, self.turn_id, dict(self.metadata)))


_SealedBlock.__qualname__ = _SealedBlock.__name__ = "Block"
_SEALED_FIELDS = frozenset({"kind", "role", "payload", "metadata"})


def seal_of(block: Block) -> Seal | None:
    """The seal of a sealed block (its payload holds it), else None."""
    if type(block) is not _SealedBlock:
        return None
    seal: Seal | None = getattr(block.__dict__.get("payload"), "_seal", None)
    return seal


def seal_block(block: Block, watch: Watch, *, payload: Any = None) -> Seal:
    """Seal ``block`` for ``watch`` (once; a block already sealed is held by one more watch): its payload
    becomes watched copies of its dicts and lists, its metadata a watched map, its class one that
    reports changes. ``payload`` is what to copy as the payload instead of the block's own. Returns its
    seal."""
    seal = seal_of(block)
    if seal is not None:
        seal.hold(watch)
        return seal
    seal = Seal(watch)
    d = block.__dict__
    d["payload"] = watched(block.payload if payload is None else payload, seal)
    d["metadata"] = watch_metadata(block.metadata, seal)
    block.__class__ = _SealedBlock
    return seal


def _sealed_copy(block: Block, watch: Watch) -> Block:
    """A sealed copy of ``block`` for ``watch`` (its payload copied once, straight into watched
    containers), remembering the same wire form."""
    copy = Block(block.kind, {}, block.role, block.id, block.turn_id, BlockMetadata(copy_json(dict(block.metadata))))
    seal = seal_block(copy, watch, payload=block.payload)
    old = seal_of(block)
    if old is not None:
        seal.key, seal.wire = old.key, old.wire
    return copy
