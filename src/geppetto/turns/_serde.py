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
import re
import secrets
import stat
from pathlib import Path
from typing import Any

import yaml

from .._exceptions import KeyFormatError, MetadataTypeError, TurnFormatError
from ._keys import (
    TOO_DEEP,
    TOO_MANY_DIGITS,
    BlockMetadata,
    TurnData,
    TurnMetadata,
    Unreadable,
    check_json_value,
    parse_key,
)
from ._model import Block, BlockKind, Turn, new_id
from ._yaml_stream import NotStreamable, stream_yaml

__all__ = [
    "FORMAT",
    "MAX_TURN_FILE_BYTES",
    "block_from_json",
    "block_to_json",
    "blocks_from_json",
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


def dumps_json(turn: Turn, *, indent: int | None = None) -> str:
    """JSON text of ``turn`` (see :func:`turn_to_dict` for what is refused)."""
    return json.dumps(_doc(turn), indent=indent, ensure_ascii=False)


def loads_json(text: str | bytes, *, source: str = "<json>", strict: bool = True) -> Turn:
    """A Turn from JSON text; raises :class:`TurnFormatError` naming what is wrong and where."""
    plain = True
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        at = exc.pos if isinstance(exc, json.JSONDecodeError) else None
        if isinstance(exc, json.JSONDecodeError) and exc.msg.startswith("Unterminated"):
            at = len(exc.doc)  # the string (or document) runs to the end of the text
        raise TurnFormatError(f"not valid JSON ({exc}); {_why_unreadable(text, at)}", source=source) from None
    except RecursionError:
        raise TurnFormatError(_TOO_DEEP, source=source) from None
    except _NotJSON as exc:
        raise TurnFormatError(f"not valid JSON: {exc}; write such numbers as strings", source=source) from None
    except ValueError:  # an integer of too many digits: read again with it set aside, so the check names its field
        doc, plain = json.loads(text, parse_int=_parse_int, parse_constant=_no_constant), False
    # Lone surrogate escapes read into text no UTF-8 file can hold: only then is every value walked.
    if plain and _SURROGATE_ESCAPE.search(text if isinstance(text, str) else text.decode("utf-8", "replace")):
        plain = False
    return _from_doc(doc, source=source, strict=strict, plain=plain)


class _NotJSON(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotJSON(f"{name} is not a JSON number")


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _parse_int(text: str) -> int | Unreadable:
    try:
        return int(text)
    except ValueError:
        return Unreadable(text, TOO_MANY_DIGITS)


_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe classes when PyYAML was built with it (parsing and emitting in C, about 10 times faster),
else the pure-Python ones; both construct only plain values."""


class _Dumper(_SafeDumper):  # type: ignore[valid-type,misc]
    def ignore_aliases(self, data: Any) -> bool:
        return True  # a value the turn holds twice is written out twice: turn files never use aliases


_BARE_BREAK = re.compile("[\x85\u2028\u2029]")


def _str_presenter(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value and _block_safe(value) else None
    if _BARE_BREAK.search(value):
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


class _PyLoader(yaml.SafeLoader):
    """The safe loader without aliases: a few nested ``*name`` references expand to billions of values
    (and a self-reference never ends). Turn files written by :func:`dumps_yaml` never use them.

    Dates stay text (JSON has none, and :func:`dumps_yaml` quotes date-like text, so nothing it writes
    changes). A scalar its tag does not fit becomes :class:`Unreadable`, which the JSON check reports with
    the field it sits in.
    """

    check_aliases = True

    def get_single_node(self) -> Any:
        node = yaml.SafeLoader.get_single_node(self)
        return _refuse_aliases(node) if self.check_aliases else node


class _CLoader(_SafeLoader, _PyLoader):  # type: ignore[valid-type,misc]
    """:class:`_PyLoader`'s rules (its resolvers and constructors, found through the MRO) on libyaml's
    parser, when PyYAML has it."""

    def get_single_node(self) -> Any:
        node = _SafeLoader.get_single_node(self)
        return _refuse_aliases(node) if self.check_aliases else node


def _refuse_aliases(root: Any) -> Any:
    """``root``, or a YAML error at the first node reached twice: an alias (``*name``) shares its anchor's node."""
    if root is None:
        return None
    seen: set[int] = set()
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            raise yaml.composer.ComposerError(
                None, None, "turn files do not use YAML aliases (*name); write the value out", node.start_mark
            )
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.append(key)
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return root


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
_PyLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_PyLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_PyLoader.add_constructor("tag:yaml.org,2002:float", _guarded(yaml.SafeLoader.construct_yaml_float))
_PyLoader.add_constructor("tag:yaml.org,2002:bool", _guarded(yaml.SafeLoader.construct_yaml_bool))
_PyLoader.add_constructor("tag:yaml.org,2002:timestamp", _no_timestamp)
_Loader: type[yaml.SafeLoader] = _PyLoader if _SafeLoader is yaml.SafeLoader else _CLoader


def loads_yaml(text: str | bytes, *, source: str = "<yaml>", strict: bool = True) -> Turn:
    """A Turn from YAML text; raises :class:`TurnFormatError` naming what is wrong and where (by line and
    column, never quoting the text)."""
    try:
        doc, plain = _read_yaml(text)
    except yaml.YAMLError as exc:
        if isinstance(exc, yaml.reader.ReaderError):
            problem = f"not text: {exc.reason} at byte {exc.position}"
            raise TurnFormatError(f"not valid YAML ({problem}); {_NOT_A_TURN}", source=source) from None
        mark = exc.problem_mark if isinstance(exc, yaml.MarkedYAMLError) else None
        raise TurnFormatError(
            f"not valid YAML ({_yaml_problem(exc)}); {_why_unreadable(text, mark.index if mark else None)}",
            source=source,
        ) from None
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
    return _from_doc(doc, source=source, strict=strict, plain=plain)


def _read_yaml(text: str | bytes) -> tuple[Any, bool]:
    """The document and whether its values are known to be plain JSON: streamed from libyaml's events
    (see :mod:`._yaml_stream`), or read by the full loader when the text holds what the stream does not
    take (then every value is walked, as before)."""
    try:
        return stream_yaml(text, _PyLoader)
    except NotStreamable:
        return _load_yaml(text), False


def _load_yaml(text: str | bytes) -> Any:
    """The document, read by libyaml when it is there. What libyaml refuses is read again by the pure-Python
    loader, which takes a little more (an escaped lone surrogate, which the JSON check then names with its
    field) and words its errors the same way everywhere. Nodes are checked for aliases only when the text
    holds a ``*``, without which YAML has none."""
    star = ("*" in text) if isinstance(text, str) else (b"*" in text)
    try:
        return _read(_Loader, text, star)
    except yaml.YAMLError:
        if _Loader is _PyLoader:
            raise
        return _read(_PyLoader, text, star)


def _read(cls: type[yaml.SafeLoader], text: str | bytes, check_aliases: bool) -> Any:
    loader = cls(text)
    loader.check_aliases = check_aliases  # type: ignore[attr-defined]
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


_NOT_A_TURN = "is it a turn file? geppetto writes them with --save-turn, /save or `geppetto sessions export`"


def _why_unreadable(text: str | bytes, at: int | None) -> str:
    """The likely cause of a parse error at character ``at``: a file cut short when it is at the end (only
    blank text follows), else a file that is not a turn at all (a README, a config file)."""
    rest = text[at:] if at is not None else text
    return "was the file cut short?" if at is not None and not rest.strip() else _NOT_A_TURN


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """What PyYAML found wrong and where, without the lines of the document it quotes."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return type(exc).__name__
    parts = [p for p in (exc.context, exc.problem) if p]
    mark = exc.problem_mark or exc.context_mark
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return "; ".join(parts) + where if parts else f"{type(exc).__name__}{where}"


MAX_TURN_FILE_BYTES = 256 << 20
"""The largest turn file :func:`load_turn` reads unless told otherwise (256 MiB: about 6 million blocks of
chat). Reading takes memory several times a file's size, so a larger one is refused before it is read."""


def load_turn(
    path: str | os.PathLike[str], *, strict: bool = True, max_bytes: int | None = MAX_TURN_FILE_BYTES
) -> Turn:
    """Read a turn file (``.json`` as JSON, anything else as YAML). The file is only read.

    A file over ``max_bytes`` (default :data:`MAX_TURN_FILE_BYTES`, 256 MiB; ``None`` for no limit) is a
    :class:`TurnFormatError` naming its size and the limit, before anything is read.
    """
    p = Path(path)
    try:
        with p.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if max_bytes is not None and size > max_bytes:
                raise TurnFormatError(
                    f"the file is {size:,} bytes, over the {max_bytes:,}-byte limit for turn files; "
                    "load it with load_turn(path, max_bytes=...) to allow more",
                    source=str(p),
                )
            raw = fh.read()
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


# -- one block at a time (the session stores keep each block version as its own JSON text) ------------
def block_to_json(block: Block) -> str:
    """JSON text of one block, in the form it has inside a turn document (see :func:`turn_to_dict`)."""
    source = f"block {block.id}"
    if not block.id:
        raise TurnFormatError("cannot be serialized: the block's id is empty; give it one", source=source)
    doc = {
        "id": block.id,
        "turn_id": block.turn_id,
        "kind": block.kind.value,
        "role": block.role,
        "payload": block.payload,
        "metadata": dict(block.metadata),
    }
    try:
        check_json_value(doc, what="block")
    except MetadataTypeError as exc:
        raise TurnFormatError(f"cannot be serialized: {exc}", source=source) from exc
    except RecursionError:
        raise TurnFormatError(f"cannot be serialized: {_TOO_DEEP}", source=source) from None
    return json.dumps(doc, ensure_ascii=False)


def blocks_from_json(texts: list[str], *, source: str, strict: bool = False) -> list[Block]:
    """Blocks from :func:`block_to_json` texts, read in one pass (see :func:`block_from_json`)."""
    joined = "[" + ",".join(texts) + "]"
    try:
        raws = json.loads(joined, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # find the block at fault, and say so
        for i, text in enumerate(texts):
            block_from_json(text, source=source, index=i, strict=strict)
        raise
    if len(raws) != len(texts):
        raise TurnFormatError("a stored block is not one JSON value", source=source)
    plain = not _SURROGATE_ESCAPE.search(joined)
    return [_block(raw, source, i, strict, plain) for i, raw in enumerate(raws)]


def block_from_json(text: str | bytes, *, source: str, index: int = 0, strict: bool = False) -> Block:
    """A block from :func:`block_to_json`'s text; with ``strict=False`` (the default) an unknown kind reads
    as ``other``, as :func:`turn_from_dict` does."""
    try:
        raw = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise TurnFormatError(f"a stored block is not valid JSON ({exc})", source=source) from None
    plain = not _SURROGATE_ESCAPE.search(text if isinstance(text, str) else text.decode("utf-8", "replace"))
    return _block(raw, source, index, strict, plain)
