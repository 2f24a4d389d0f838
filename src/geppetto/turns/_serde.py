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
the target, so a failed save leaves the old file whole; see :func:`~._serde_files.save_turn`.

This module reads and writes the text; the document form is :mod:`._serde_doc`, the YAML classes
:mod:`._serde_yaml`, and files :mod:`._serde_files`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .._exceptions import MetadataTypeError, TurnFormatError
from ._keys import (
    TOO_MANY_DIGITS,
    Unreadable,
    check_json_value,
)
from ._model import Block, Turn
from ._serde_doc import _TOO_DEEP, FORMAT, _block, _doc, _from_doc, _why_unreadable, turn_from_dict, turn_to_dict

__all__ = [
    "FORMAT",
    "block_from_json",
    "block_to_json",
    "blocks_from_json",
    "dumps_json",
    "dumps_yaml",
    "loads_json",
    "loads_yaml",
    "turn_from_dict",
    "turn_to_dict",
]


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
    if plain and _escapes_surrogate(text if isinstance(text, str) else text.decode("utf-8", "replace")):
        plain = False
    return _from_doc(doc, source=source, strict=strict, plain=plain)


class _NotJSON(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _NotJSON(f"{name} is not a JSON number")


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _escapes_surrogate(text: str) -> bool:
    """Whether ``text`` may hold a surrogate escape (``\\ud800``...): a plain substring test first, which
    scans a whole store's JSON several times faster than the pattern, that only runs when it can match."""
    return "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None


def _parse_int(text: str) -> int | Unreadable:
    try:
        return int(text)
    except ValueError:
        return Unreadable(text, TOO_MANY_DIGITS)


def dumps_yaml(turn: Turn) -> str:
    """YAML text ending in the explicit end line ``...``, so a file cut short can be told from a whole one."""
    from ._serde_yaml import dumps_yaml as dump  # PyYAML is loaded by the first YAML file, not by import geppetto

    return dump(turn)


def loads_yaml(text: str | bytes, *, source: str = "<yaml>", strict: bool = True) -> Turn:
    """A Turn from YAML text; raises :class:`TurnFormatError` naming what is wrong and where (by line and
    column, never quoting the text)."""
    from ._serde_yaml import loads_yaml as load

    return load(text, source=source, strict=strict)


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
    plain = not _escapes_surrogate(joined)
    return [_block(raw, source, i, strict, plain) for i, raw in enumerate(raws)]


def block_from_json(text: str | bytes, *, source: str, index: int = 0, strict: bool = False) -> Block:
    """A block from :func:`block_to_json`'s text; with ``strict=False`` (the default) an unknown kind reads
    as ``other``, as :func:`turn_from_dict` does."""
    try:
        raw = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise TurnFormatError(f"a stored block is not valid JSON ({exc})", source=source) from None
    plain = not _escapes_surrogate(text if isinstance(text, str) else text.decode("utf-8", "replace"))
    return _block(raw, source, index, strict, plain)
