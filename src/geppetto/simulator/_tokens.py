"""A deterministic tokenizer: words and punctuation marks, plus a fixed overhead per item."""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r"\w+|[^\w\s]")
# Keys whose values are identifiers or opaque blobs, not text the model reads.
SKIP = frozenset(
    {
        "id",
        "type",
        "status",
        "call_id",
        "tool_call_id",
        "tool_use_id",
        "encrypted_content",
        "signature",
        "thoughtSignature",
        "thought_signature",
        "role",
        "annotations",
        "logprobs",
        "cache_control",
        "index",
    }
)
ITEM_OVERHEAD = 3


def count_text(text: str) -> int:
    """Number of tokens in `text` (each run of word characters and each punctuation mark is one)."""
    return len(_TOKEN.findall(text))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        out: list[str] = []
        for key, inner in value.items():
            if key not in SKIP:
                out.extend(_strings(inner))
        return out
    if isinstance(value, list):
        return [s for inner in value for s in _strings(inner)]
    return []


def count_value(value: Any) -> int:
    """Tokens in every text-bearing string inside a JSON value (ids and signatures excluded)."""
    return sum(count_text(s) for s in _strings(value))


def count_items(items: list[Any]) -> int:
    """Tokens of a list of context items: their text plus ITEM_OVERHEAD each."""
    return sum(ITEM_OVERHEAD + count_value(item) for item in items)
