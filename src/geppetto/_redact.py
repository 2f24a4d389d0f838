"""Credentials out of text that is shown or logged: store and broker URLs, and messages that quote them."""

from __future__ import annotations

import re

__all__ = ["redact_url"]

# The password of ``scheme://user:password@host`` (userinfo ends at the last ``@`` before the path, so a
# password holding an unescaped ``@`` is hidden whole), a NATS token (``nats://token@host``), and libpq's
# ``password=...``.
_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)[^\s/]*@")
_TOKEN = re.compile(r"(\b(?:nats|tls)://)[^:/@\s]+@")
_KEY_VALUE = re.compile(r"(password\s*=\s*)[^\s&]+", re.IGNORECASE)


def redact_url(text: str) -> str:
    """``text`` (a URL, or a message quoting URLs) with every password in it replaced by ``***``: the
    ``user:password@`` form, a NATS token (``nats://token@host``) and the ``password=value`` form."""
    text = _PASSWORD.sub(r"\1***@", text)
    text = _TOKEN.sub(r"\1***@", text)
    return _KEY_VALUE.sub(r"\1***", text)
