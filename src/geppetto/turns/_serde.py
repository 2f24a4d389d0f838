"""Turns to and from JSON and YAML, exactly.

The document form is a mapping::

    format: geppetto.turn/v1
    id: 5c1d...
    metadata: {geppetto.session_id@v1: ...}
    data: {}
    blocks:
      - {id: ..., turn_id: ..., kind: user, role: user, payload: {text: hi}, metadata: {}}
    ...

YAML ends with the explicit end line ``...``: a YAML document that names its ``format`` but lacks it
was cut short and is refused. YAML dates (``2024-05-01``) read as text, since JSON has no dates; a value
no reader can build (``!!int abc``, an integer of more than 4,300 digits) is refused naming its field.

Files are strict: a document that is not a mapping with a ``blocks`` list, an unknown field, an unknown
block kind or an empty ``id`` is a :class:`TurnFormatError` naming the file, the field and the fix.
``strict=False`` (what session stores use) reads an unknown kind as ``other`` and skips unknown fields;
everything else is checked the same way.

Loading never constructs objects (YAML is read with the safe loader) and never writes to the file it
reads. Saving writes a temporary file in the target's folder, flushes it to disk and renames it over
the target, so a failed save leaves the old file whole; see :func:`save_turn`.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

import yaml

from .._exceptions import KeyFormatError, MetadataTypeError, TurnFormatError
from ._keys import (
    TOO_MANY_DIGITS,
    BlockMetadata,
    TurnData,
    TurnMetadata,
    Unreadable,
    check_json_value,
    parse_key,
)
from ._model import Block, BlockKind, Turn

__all__ = [
    "FORMAT",
    "dumps_json",
    "dumps_yaml",
    "load_turn",
    "loads_json",
    "loads_yaml",
    "save_turn",
    "turn_from_dict",
    "turn_to_dict",
]

FORMAT = "geppetto.turn/v1"
_KINDS = ", ".join(k.value for k in BlockKind)
_SHAPE = (
    "a turn file is a mapping with a list of blocks, for example "
    "{id: t1, blocks: [{kind: user, payload: {text: hello}}]}"
)
_TURN_FIELDS = ("format", "id", "metadata", "data", "blocks")
_BLOCK_FIELDS = ("id", "turn_id", "kind", "role", "payload", "metadata")
_EMPTY_ID = "the id is empty; leave the field out to have a fresh id made, or write one"
_TOO_DEEP = "values are nested too deeply to read; a turn file nests lists and mappings a few hundred levels at most"


def turn_to_dict(turn: Turn) -> dict[str, Any]:
    """The plain-JSON document form of ``turn`` (a fresh structure; nothing is shared).

    Raises :class:`TurnFormatError` when the turn holds a value that is not plain JSON, or an empty
    turn or block id (which no file could carry back: a missing id reads as a fresh one).
    """
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
    return json.loads(json.dumps(doc))  # type: ignore[no-any-return]


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
    if not isinstance(doc, dict):
        raise TurnFormatError(f"found {_kind(doc)}, not a turn; {_SHAPE}", source=source)
    if "blocks" not in doc:
        names = [repr(k) for k in list(doc)[:6]]
        found = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "") or "nothing"
        raise TurnFormatError(f"no 'blocks' field (found {found}), so this is not a turn; {_SHAPE}", source=source)
    _check_fields(doc, _TURN_FIELDS, source, "", strict, "put your own values in metadata or data")
    fmt = doc.get("format", FORMAT)
    if fmt != FORMAT:
        raise TurnFormatError(
            f"unsupported format {fmt!r}; this version reads {FORMAT!r}", source=source, field="format"
        )
    turn_id = _id(doc, source, "id")
    metadata = TurnMetadata(_keyed_map(doc.get("metadata"), source, "metadata"))
    data = TurnData(_keyed_map(doc.get("data"), source, "data"))
    raw_blocks = doc["blocks"]
    if not isinstance(raw_blocks, list):
        raise TurnFormatError(f"expected a list of blocks, found {_kind(raw_blocks)}", source=source, field="blocks")
    blocks = [_block(raw, source, f"blocks[{i}]", strict) for i, raw in enumerate(raw_blocks)]
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


def _block(raw: Any, source: str, where: str, strict: bool) -> Block:
    if not isinstance(raw, dict):
        raise TurnFormatError(f"expected a block mapping, found {_kind(raw)}", source=source, field=where)
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
        turn_id=_str(raw.get("turn_id", ""), source, f"{where}.turn_id"),
        metadata=BlockMetadata(_keyed_map(raw.get("metadata"), source, f"{where}.metadata")),
    )
    if block_id is not None:
        block.id = block_id
    return block


def _keyed_map(raw: Any, source: str, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TurnFormatError(f"expected a mapping of typed keys, found {_kind(raw)}", source=source, field=where)
    for key in raw:
        try:
            parse_key(key)
        except KeyFormatError as exc:
            raise TurnFormatError(str(exc), source=source, field=f"{where}.{key}") from None
    _check_json(raw, source, where)
    return raw


def _check_json(value: Any, source: str, where: str) -> None:
    try:
        check_json_value(value, what=where)
    except MetadataTypeError as exc:
        raise TurnFormatError(str(exc), source=source, field=where) from None
    except RecursionError:
        raise TurnFormatError(_TOO_DEEP, source=source, field=where) from None


def _str(value: Any, source: str, where: str) -> str:
    if not isinstance(value, str):
        raise TurnFormatError(f"expected text, found {_kind(value)}", source=source, field=where)
    return value


def _kind(value: Any) -> str:
    if isinstance(value, Unreadable):
        return f"a value that {value.problem}"
    return "nothing" if value is None else f"a {type(value).__name__}"


def dumps_json(turn: Turn, *, indent: int | None = None) -> str:
    return json.dumps(turn_to_dict(turn), indent=indent, ensure_ascii=False)


def loads_json(text: str | bytes, *, source: str = "<json>", strict: bool = True) -> Turn:
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TurnFormatError(f"not valid JSON ({exc}); was the file cut short?", source=source) from None
    except RecursionError:
        raise TurnFormatError(_TOO_DEEP, source=source) from None
    except ValueError:  # an integer of too many digits: read again with it set aside, so the check names its field
        doc = json.loads(text, parse_int=_parse_int)
    return turn_from_dict(doc, source=source, strict=strict)


def _parse_int(text: str) -> int | Unreadable:
    try:
        return int(text)
    except ValueError:
        return Unreadable(text, TOO_MANY_DIGITS)


class _Dumper(yaml.SafeDumper):
    pass


def _str_presenter(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and _block_safe(value) else None
    if any(c in value for c in "\x85\u2028\u2029"):
        style = '"'  # PyYAML writes these line breaks bare in quotes and reads a bare NEL back as a space
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _block_safe(value: str) -> bool:
    # literal blocks cannot hold trailing spaces on lines, tabs or other control characters exactly
    return all(c == "\n" or (c.isprintable() and c != "\t") for c in value) and not any(
        line.endswith(" ") for line in value.split("\n")
    )


_Dumper.add_representer(str, _str_presenter)


def dumps_yaml(turn: Turn) -> str:
    """YAML text ending in the explicit end line ``...``, so a file cut short can be told from a whole one."""
    return yaml.dump(
        turn_to_dict(turn), Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=1 << 30, explicit_end=True
    )


class _Loader(yaml.SafeLoader):
    """The safe loader without aliases: a few nested ``*name`` references expand to billions of values
    (and a self-reference never ends). Turn files written by :func:`dumps_yaml` never use them.

    Dates stay text (JSON has none, and :func:`dumps_yaml` quotes date-like text, so nothing it writes
    changes). A scalar its tag does not fit becomes :class:`Unreadable`, which the JSON check reports with
    the field it sits in.
    """

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "turn files do not use YAML aliases (*name); write the value out", mark
            )
        return super().compose_node(parent, index)


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    try:
        return loader.construct_yaml_int(node)
    except ValueError:
        if str(node.value).replace("_", "").lstrip("+-").isdigit():
            return Unreadable(node.value, TOO_MANY_DIGITS)
        return _misfit(node)


def _guarded(construct: Any) -> Any:
    def constructor(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
        try:
            return construct(loader, node)
        except (ValueError, KeyError, AttributeError):  # what PyYAML's scalar constructors raise on a misfit
            return _misfit(node)

    return constructor


def _misfit(node: yaml.Node) -> Unreadable:
    tag = str(node.tag).replace("tag:yaml.org,2002:", "!!")
    return Unreadable(str(node.value), f"is {node.value!r} with the tag {tag}, which it does not fit; fix the value")


def _no_timestamp(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Unreadable:
    return Unreadable(str(node.value), "is tagged !!timestamp; a turn holds dates as text, so remove the tag")


# a copy without the timestamp entry: SafeLoader's table is shared with every other safe loader
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _guarded(yaml.SafeLoader.construct_yaml_float))
_Loader.add_constructor("tag:yaml.org,2002:bool", _guarded(yaml.SafeLoader.construct_yaml_bool))
_Loader.add_constructor("tag:yaml.org,2002:timestamp", _no_timestamp)


def loads_yaml(text: str | bytes, *, source: str = "<yaml>", strict: bool = True) -> Turn:
    try:
        doc = yaml.load(text, Loader=_Loader)  # a SafeLoader: never constructs objects
    except yaml.YAMLError as exc:
        raise TurnFormatError(f"not valid YAML ({exc}); was the file cut short?", source=source) from None
    except RecursionError:
        raise TurnFormatError(_TOO_DEEP, source=source) from None
    # YAML cut at a line end still parses; a saved turn (it names its format) ends with the line "..."
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if isinstance(doc, dict) and "format" in doc and not raw.rstrip().endswith(b"\n..."):
        raise TurnFormatError(
            "the document does not end with the line '...', so it may have been cut short; "
            "if it is complete, add a line '...' at its end",
            source=source,
        )
    return turn_from_dict(doc, source=source, strict=strict)


def load_turn(path: str | os.PathLike[str], *, strict: bool = True) -> Turn:
    """Read a turn file (``.json`` as JSON, anything else as YAML). The file is only read."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise TurnFormatError("no such file; check the path", source=str(p)) from None
    except OSError as exc:
        raise TurnFormatError(f"cannot be read: {exc.strerror}", source=str(p)) from None
    if not raw.strip():
        raise TurnFormatError(f"the file is empty; {_SHAPE}", source=str(p))
    if p.suffix.lower() == ".json":
        return loads_json(raw, source=str(p), strict=strict)
    return loads_yaml(raw, source=str(p), strict=strict)


def save_turn(path: str | os.PathLike[str], turn: Turn) -> Path:
    """Write ``turn`` to ``path`` (JSON for ``.json``, else YAML) atomically. Returns ``path``.

    The text goes to a temporary file in the target's folder, is flushed to disk (``fsync``) and then
    renamed over the target, so a crash or a failed write leaves the old file whole and a reader never
    sees half a turn. An existing file keeps its permission bits; a new one gets the usual ones (0666
    less the umask). When ``path`` is a symbolic link, the file it points to is replaced and the link
    stays a link. A turn that cannot be serialized raises :class:`TurnFormatError` before anything is
    written.
    """
    p = Path(path)
    text = dumps_json(turn, indent=2) if p.suffix.lower() == ".json" else dumps_yaml(turn)
    p.parent.mkdir(parents=True, exist_ok=True)
    target = Path(os.path.realpath(p))  # through symbolic links, so a link is written through, not replaced
    try:
        mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    # a new file: 0o666 and the kernel applies the umask; an existing one: private until its mode is copied
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666 if mode is None else 0o600
    )
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(target.parent)
    return p


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX); a file system that cannot sync a folder is left as it is."""
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
