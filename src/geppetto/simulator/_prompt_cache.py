"""Prompt caching as the services report it: Anthropic's ``cache_control`` breakpoints and Gemini's implicit cache.

A prompt is a sequence of segments (the system prompt, then each content block of each message), each with
its tokens. A prefix ending at a segment is identified by a digest over the model and the segments so far
(what the model does not read left out: ids, statuses, ``cache_control`` marks). Anthropic: the prefix ending at each marked segment is written to the
cache when it is at least :data:`MIN_TOKENS` long; a request reads the longest cached prefix ending at any
segment boundary up to its last mark (the service looks back about 20 blocks; the simulator looks at all).
Gemini (implicit caching): every prompt of at least :data:`MIN_TOKENS` is cached at each boundary, and a
later request reads the longest cached prefix.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from ._state import SimState
from ._tokens import SKIP

__all__ = ["MIN_TOKENS", "CacheUse", "Segment", "cache_use"]

MIN_TOKENS = 1024


@dataclass
class Segment:
    value: Any
    tokens: int
    marked: bool = False


@dataclass
class CacheUse:
    read: int = 0
    write: int = 0


def _plain(value: Any) -> Any:
    """``value`` as the model reads it: without ids, statuses, signatures and ``cache_control`` marks (a server
    may give an item a fresh id each time it is sent; the prompt it makes is the same)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in SKIP}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def cache_use(state: SimState, model: str, segments: list[Segment], *, implicit: bool = False) -> CacheUse:
    """What the request of ``segments`` reads from and writes to ``state``'s cache (and record its writes)."""
    digest = hashlib.sha256(model.encode())
    boundaries: list[tuple[str, int, bool]] = []  # (digest, tokens so far, marked)
    total = 0
    for segment in segments:
        digest.update(json.dumps(_plain(segment.value), sort_keys=True).encode())
        total += segment.tokens
        boundaries.append((digest.copy().hexdigest(), total, segment.marked or implicit))
    last_mark = max((i for i, b in enumerate(boundaries) if b[2]), default=-1)
    if last_mark < 0:
        return CacheUse()
    with state.lock:
        read = max((tokens for key, tokens, _ in boundaries[: last_mark + 1] if key in state.prompt_cache), default=0)
        written = 0
        for key, tokens, marked in boundaries[: last_mark + 1]:
            if marked and tokens >= MIN_TOKENS and key not in state.prompt_cache:
                state.prompt_cache.add(key)
                written = max(written, tokens)
    if implicit:
        return CacheUse(read=read)  # Gemini bills no write for its implicit cache
    return CacheUse(read=read, write=max(written - read, 0))
