"""Credentials out of text that is shown or logged: store and broker URLs, messages that quote them, and
API keys in a provider's (or a proxy's) error text."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["SECRET_HEADERS", "redact_secrets", "redact_url", "redact_value", "remember_secrets"]

# The password of ``scheme://user:password@host`` (userinfo ends at the last ``@`` before the path, so a
# password holding an unescaped ``@`` is hidden whole), a NATS token (``nats://token@host``), and libpq's
# ``password=...``.
_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)[^\s/]*@")
_TOKEN = re.compile(r"(\b(?:nats|tls)://)[^:/@\s]+@")
_KEY_VALUE = re.compile(r"(password\s*=\s*)[^\s&]+", re.IGNORECASE)

SHOWN = "***"
"""What a hidden secret reads as."""

# Anything shaped like a provider key, whoever's it is: OpenAI's and Anthropic's ``sk-...`` (``sk-proj-``,
# ``sk-ant-api03-``), Google's ``AIza...``, a bearer token of 20 characters or more, and a key passed in a
# URL's query (``?key=...``, Gemini's form).
_SHAPED = re.compile(
    r"\bsk-[A-Za-z0-9_\-]{16,}"
    r"|\bAIza[0-9A-Za-z_\-]{20,}"
    r"|(?<=Bearer )[A-Za-z0-9._~+/\-]{20,}=*"
    r"|(?<=[?&]key=)[^&\s\"']+",
    re.IGNORECASE,
)

SECRET_HEADERS = ("authorization", "x-api-key", "x-goog-api-key", "api-key")
"""Request headers whose values are credentials (``authorization`` less its ``Bearer`` scheme)."""

_MIN_KEY = 8
"""A configured key shorter than this is not hidden by value (it would hide ordinary words); its shape may."""
_KEPT = 64
"""The configured keys remembered, newest last (a process uses a handful)."""
_known: dict[str, None] = {}


def redact_url(text: str) -> str:
    """``text`` (a URL, or a message quoting URLs) with every password in it replaced by ``***``: the
    ``user:password@`` form, a NATS token (``nats://token@host``) and the ``password=value`` form."""
    text = _PASSWORD.sub(r"\1***@", text)
    text = _TOKEN.sub(r"\1***@", text)
    return _KEY_VALUE.sub(r"\1***", text)


def remember_secrets(headers: Mapping[str, str]) -> None:
    """Remember the credentials among a request's ``headers`` (:data:`SECRET_HEADERS`), so that
    :func:`redact_secrets` hides them by value wherever they are quoted later, key-shaped or not."""
    for name in SECRET_HEADERS:
        value = headers.get(name)
        if not value:
            continue
        value = value.removeprefix("Bearer ").removeprefix("bearer ").strip()
        if len(value) >= _MIN_KEY and value not in _known:
            _known[value] = None
            if len(_known) > _KEPT:
                del _known[next(iter(_known))]


def redact_secrets(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with every configured key (those :func:`remember_secrets` saw, and ``secrets``) and
    anything shaped like a key (``sk-...``, ``sk-ant-...``, ``AIza...``, a long bearer token, ``?key=``)
    replaced by ``***``; store and broker passwords too (:func:`redact_url`)."""
    if not text:
        return text
    for secret in (*_known, *secrets):
        if len(secret) >= _MIN_KEY and secret in text:
            text = text.replace(secret, SHOWN)
    return redact_url(_SHAPED.sub(SHOWN, text))


def redact_value(value: Any) -> Any:
    """``value`` (a parsed JSON body: dicts, lists, strings) with :func:`redact_secrets` applied to every
    string in it, keys included."""
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, dict):
        return {redact_secrets(k) if isinstance(k, str) else k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    return value
