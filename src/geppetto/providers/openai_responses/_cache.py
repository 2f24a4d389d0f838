"""Prompt caching settings: the ``prompt_cache_key`` a request carries and ``prompt_cache_retention``.

By default every request of a session carries the same key, derived from the Turn's session id
(``geppetto-`` and 32 hex digits of its sha256: stable across processes and restarts, at most 64
characters as the API requires, and not the session id itself), so the requests of one session are
routed to the same cache; a Turn without a session id carries none. A string is sent as it is; a
callable ``(turn) -> str | None`` chooses per request; ``False`` or ``None`` sends none.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from geppetto._exceptions import ConfigurationError
from geppetto.turns import TURN_META_SESSION_ID, Turn

__all__ = ["PROMPT_CACHE_RETENTIONS", "check_cache_settings", "prompt_cache_key_for", "session_cache_key"]

PROMPT_CACHE_RETENTIONS = ("in_memory", "24h")
"""The values ``prompt_cache_retention`` takes."""

_MAX_KEY = 64

PromptCacheKey = str | bool | Callable[[Turn], str | None] | None


def session_cache_key(session_id: str) -> str:
    """The default ``prompt_cache_key`` of a session."""
    return "geppetto-" + hashlib.sha256(session_id.encode()).hexdigest()[:32]


def _checked_key(key: Any, where: str) -> str:
    if not isinstance(key, str) or not key or len(key) > _MAX_KEY:
        raise ConfigurationError(
            f"{where} gave prompt_cache_key {key!r}: pass a non-empty string of at most {_MAX_KEY} characters, "
            "True (one key per session), or None (no key)"
        )
    return key


def check_cache_settings(key: PromptCacheKey, retention: str | None) -> None:
    """Raise ``ConfigurationError`` naming the fix for a key or retention the API would refuse."""
    if isinstance(key, str) or not (key is None or isinstance(key, bool) or callable(key)):
        _checked_key(key, "the engine")
    if retention is not None and retention not in PROMPT_CACHE_RETENTIONS:
        raise ConfigurationError(
            f"unknown prompt_cache_retention {retention!r}; use one of {', '.join(PROMPT_CACHE_RETENTIONS)} or None"
        )


def prompt_cache_key_for(setting: PromptCacheKey, turn: Turn) -> str | None:
    """The key a request for ``turn`` carries under ``setting`` (None: no key)."""
    if setting is None or setting is False:
        return None
    if setting is True:
        session_id = TURN_META_SESSION_ID.get(turn.metadata)
        return session_cache_key(session_id) if session_id else None
    if isinstance(setting, str):
        return setting
    key = setting(turn)
    return None if key is None else _checked_key(key, "the prompt_cache_key callable")
