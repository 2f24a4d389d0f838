"""A turn's document form (a plain-JSON mapping) to and from a :class:`Turn`, every field checked: what the
JSON and YAML readers and writers of :mod:`._serde` build on."""

from __future__ import annotations

import json
from typing import Any

from .._exceptions import KeyFormatError, MetadataTypeError, TurnFormatError
from ._keys import (
    TOO_DEEP,
    BlockMetadata,
    TurnData,
    TurnMetadata,
    Unreadable,
    check_json_value,
    parse_key,
)
from ._model import Block, BlockKind, Turn, new_id

FORMAT = "geppetto.turn/v1"
_KINDS = ", ".join(k.value for k in BlockKind)
_SHAPE = (
    "a turn file is a mapping with a list of blocks, for example "
    "{id: t1, blocks: [{kind: user, payload: {text: hello}}]}"
)
_TURN_FIELDS = ("format", "id", "metadata", "data", "blocks")
_BLOCK_FIELDS = ("id", "turn_id", "kind", "role", "payload", "metadata")
_EMPTY_ID = "the id is empty; leave the field out to have a fresh id made, or write one"
_TOO_DEEP = f"a value {TOO_DEEP}"


def turn_to_dict(turn: Turn) -> dict[str, Any]:
    """The plain-JSON document form of ``turn`` (a fresh structure; nothing is shared).

    Raises :class:`TurnFormatError` when the turn holds a value that is not plain JSON, or an empty
    turn or block id (which no file could carry back: a missing id reads as a fresh one).
    """
    return json.loads(json.dumps(_doc(turn)))  # type: ignore[no-any-return]


def _doc(turn: Turn) -> dict[str, Any]:
    """The document form, checked, sharing the turn's payloads and maps: only for writing it out at once."""
    _check_ids(turn)
    doc = {
        "format": FORMAT,
        "id": turn.id,
        "metadata": dict(turn.metadata),
        "data": dict(turn.data),
        "blocks": [
            {
                "id": b.id,
                "turn_id": b.turn_id,
                "kind": b.kind.value,
                "role": b.role,
                "payload": b.payload,
                "metadata": dict(b.metadata),
            }
            for b in turn.blocks
        ],
    }
    try:
        check_json_value(doc, what="turn")
    except MetadataTypeError as exc:
        raise TurnFormatError(f"cannot be serialized: {exc}", source=f"turn {turn.id}") from exc
    return doc


def _check_ids(turn: Turn) -> None:
    source = f"turn {turn.id}" if turn.id else "turn"
    if not turn.id:
        raise TurnFormatError(
            "cannot be serialized: the turn's id is empty; give it one (Turn() makes one)", source=source
        )
    for i, block in enumerate(turn.blocks):
        if not block.id:
            raise TurnFormatError(
                f"cannot be serialized: blocks[{i}].id is empty; give the block one (Block(...) makes one)",
                source=source,
            )


def turn_from_dict(doc: Any, *, source: str = "<mapping>", strict: bool = True) -> Turn:
    """Build a Turn from its document form.

    ``strict`` (the default) rejects unknown fields and unknown block kinds; with ``strict=False`` an
    unknown field is skipped and a block of unknown kind reads back as ``BlockKind.OTHER``, its original
    kind kept in ``payload['original_kind']``. A missing ``id`` reads as a fresh one; an empty one is
    refused. Raises :class:`TurnFormatError` naming ``source`` and the field at fault.
    """
    return _from_doc(doc, source=source, strict=strict, plain=False)


def _from_doc(doc: Any, *, source: str, strict: bool, plain: bool) -> Turn:
    """:func:`turn_from_dict`; ``plain`` says every value is already known to be plain JSON (what
    ``json.loads`` made of text without lone surrogates or oversized integers), so values are not walked."""
    if not isinstance(doc, dict):
        raise TurnFormatError(f"found {_kind(doc)}, not a turn; {_SHAPE}", source=source)
    if "blocks" not in doc:
        fields = f"{len(doc)} other field{'s' if len(doc) != 1 else ''}" if doc else "no fields"
        raise TurnFormatError(
            f"the mapping has no 'blocks' field ({fields}), so this is not a turn; {_SHAPE}", source=source
        )
    _check_fields(doc, _TURN_FIELDS, source, "", strict, "put your own values in metadata or data")
    fmt = doc.get("format", FORMAT)
    if fmt != FORMAT:
        raise TurnFormatError(
            f"unsupported format {fmt!r}; this version reads {FORMAT!r}", source=source, field="format"
        )
    turn_id = _id(doc, source, "id")
    metadata = TurnMetadata(_keyed_map(doc.get("metadata"), source, "metadata", plain))
    data = TurnData(_keyed_map(doc.get("data"), source, "data", plain))
    raw_blocks = doc["blocks"]
    if not isinstance(raw_blocks, list):
        raise TurnFormatError(f"expected a list of blocks, found {_kind(raw_blocks)}", source=source, field="blocks")
    blocks = [_block(raw, source, i, strict, plain) for i, raw in enumerate(raw_blocks)]
    turn = Turn(blocks=blocks, metadata=metadata, data=data)
    if turn_id is not None:
        turn.id = turn_id
    return turn


def _check_fields(
    raw: dict[Any, Any], known: tuple[str, ...], source: str, where: str, strict: bool, hint: str
) -> None:
    if not strict:
        return
    for name in raw:
        if name not in known:
            what = "a block" if where else "a turn"
            raise TurnFormatError(
                f"unknown field {name!r}; {what} has only {', '.join(known)} ({hint}, "
                "or load with strict=False to skip unknown fields)",
                source=source,
                field=f"{where}.{name}" if where else str(name),
            )


def _id(raw: dict[str, Any], source: str, where: str) -> str | None:
    """The ``id`` field: ``None`` when absent (a fresh one is made), refused when empty."""
    if "id" not in raw:
        return None
    value = _str(raw["id"], source, where)
    if not value:
        raise TurnFormatError(_EMPTY_ID, source=source, field=where)
    return value


def _block(raw: Any, source: str, index: int, strict: bool, plain: bool) -> Block:
    if not isinstance(raw, dict):
        raise TurnFormatError(f"expected a block mapping, found {_kind(raw)}", source=source, field=f"blocks[{index}]")
    if strict and not _BLOCK_FIELD_SET.issuperset(raw):
        _check_fields(raw, _BLOCK_FIELDS, source, f"blocks[{index}]", strict, "put kind-specific values in payload")
    kind_text = raw.get("kind")
    kind = _KIND_OF.get(kind_text) if isinstance(kind_text, str) else None
    payload = raw.get("payload", {})
    if kind is None or type(payload) is not dict or not plain:
        return _checked_block(raw, source, f"blocks[{index}]", strict)
    role, turn_id, block_id = raw.get("role", ""), raw.get("turn_id", ""), raw.get("id")
    metadata = raw.get("metadata")
    if type(role) is not str or type(turn_id) is not str or type(block_id) is not str or not block_id:
        return _checked_block(raw, source, f"blocks[{index}]", strict)
    if metadata is not None:
        metadata = _keyed_map(metadata, source, f"blocks[{index}].metadata", plain)
    return Block(kind, payload, role, block_id, turn_id, BlockMetadata(metadata or {}))


_BLOCK_FIELD_SET = frozenset(_BLOCK_FIELDS)
_KIND_OF = {k.value: k for k in BlockKind}


def _checked_block(raw: dict[Any, Any], source: str, where: str, strict: bool) -> Block:
    """A block read field by field, each checked and any fault named (the path for all but plain, whole blocks)."""
    _check_fields(raw, _BLOCK_FIELDS, source, where, strict, "put kind-specific values in payload")
    kind_text = raw.get("kind")
    if not isinstance(kind_text, str):
        raise TurnFormatError(f"missing or non-text kind; use one of: {_KINDS}", source=source, field=f"{where}.kind")
    payload = raw.get("payload", {})
    if not isinstance(payload, dict):
        raise TurnFormatError(
            f"payload must be a mapping, found {_kind(payload)}", source=source, field=f"{where}.payload"
        )
    _check_json(payload, source, f"{where}.payload")
    try:
        kind = BlockKind(kind_text)
    except ValueError:
        if strict:
            raise TurnFormatError(
                f"unknown block kind {kind_text!r}; use one of: {_KINDS} (or load with strict=False to read it as 'other')",
                source=source,
                field=f"{where}.kind",
            ) from None
        kind = BlockKind.OTHER
        payload = {**payload, "original_kind": kind_text}
    block_id = _id(raw, source, f"{where}.id")
    block = Block(
        kind=kind,
        payload=payload,
        role=_str(raw.get("role", ""), source, f"{where}.role"),
        id=block_id if block_id is not None else new_id(),
        turn_id=_str(raw.get("turn_id", ""), source, f"{where}.turn_id"),
        metadata=BlockMetadata(_keyed_map(raw.get("metadata"), source, f"{where}.metadata")),
    )
    return block


def _keyed_map(raw: Any, source: str, where: str, plain: bool = False) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TurnFormatError(f"expected a mapping of typed keys, found {_kind(raw)}", source=source, field=where)
    for key in raw:
        try:
            parse_key(key)
        except KeyFormatError as exc:
            raise TurnFormatError(str(exc), source=source, field=f"{where}.{key}") from None
    if not plain:
        _check_json(raw, source, where)
    return raw


def _check_json(value: Any, source: str, where: str) -> None:
    try:
        check_json_value(value, what=where)
    except MetadataTypeError as exc:
        raise TurnFormatError(str(exc), source=source, field=where) from None


def _str(value: Any, source: str, where: str) -> str:
    if not isinstance(value, str):
        raise TurnFormatError(f"expected text, found {_kind(value)}", source=source, field=where)
    return value


def _kind(value: Any) -> str:
    if isinstance(value, Unreadable):
        return f"a value that {value.problem}"
    return "nothing" if value is None else f"a {type(value).__name__}"


_NOT_A_TURN = "is it a turn file? geppetto writes them with --save-turn, /save or `geppetto sessions export`"


def _why_unreadable(text: str | bytes, at: int | None) -> str:
    """The likely cause of a parse error at character ``at``: a file cut short when it is at the end (only
    blank text follows), else a file that is not a turn at all (a README, a config file)."""
    rest = text[at:] if at is not None else text
    return "was the file cut short?" if at is not None and not rest.strip() else _NOT_A_TURN
