"""Strict JSON text checks the providers' parsers make and Python's `json` does not: unpaired surrogates.

Python reads `"\\ud800"` into a str that cannot be encoded back to UTF-8; the services refuse such a body
as invalid JSON (Anthropic: `The request body is not valid JSON: no low surrogate in string: line 1
column 30 (char 29)`, yyjson's wording).
"""

from __future__ import annotations

import json
import re

_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def decode(raw: bytes) -> str:
    """The body text as `json.loads` reads bytes (UTF-8/16/32 detected; surrogates passed through)."""
    return raw.decode(json.detect_encoding(raw), "surrogatepass")


def unpaired_surrogate(text: str) -> tuple[str, int] | None:
    """The first surrogate problem in the JSON `text` (known to parse) as (yyjson's message, char index)."""
    if not _SURROGATE_ESCAPE.search(text):
        return None
    pending: int | None = None  # where the low surrogate must start, after a high one
    for match in _ESCAPE.finditer(text):
        code = int(match.group(1), 16) if match.group(1) else None
        if pending is not None:
            if match.start() != pending or code is None:
                return "no low surrogate in string", pending
            if not 0xDC00 <= code <= 0xDFFF:
                return "invalid low surrogate in string", pending
            pending = None
        elif code is not None and 0xD800 <= code <= 0xDBFF:
            pending = match.end()
        elif code is not None and 0xDC00 <= code <= 0xDFFF:
            return "invalid high surrogate in string", match.start()
    return None if pending is None else ("no low surrogate in string", pending)


def position(text: str, index: int) -> str:
    """`line L column C (char I)`, as Python's JSONDecodeError and the services word a position."""
    line = text.count("\n", 0, index) + 1
    column = index - text.rfind("\n", 0, index)
    return f"line {line} column {column} (char {index})"


def has_surrogate_literal(text: str) -> bool:
    """Whether the raw text itself carries surrogate code points (bytes that are not valid UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
