"""The kill switch (seed 000, rollout and rollback): ``GEPPETTO_CHAINING=off`` turns chaining and
conversation mode off for every Responses engine in the process.

Read on every request, so it applies to engines built before it was set, to every profile and to every
session ``geppetto serve`` runs; requests then go stateless (the whole Turn, no ``previous_response_id``,
no conversation), each with a logged reason. The gauge ``geppetto_responses_chaining_enabled`` (1/0)
says whether chaining is on.
"""

from __future__ import annotations

import os

from geppetto._exceptions import ConfigurationError

__all__ = ["CHAINING_ENV", "chaining_enabled"]

CHAINING_ENV = "GEPPETTO_CHAINING"
"""The environment variable of the kill switch: ``off`` turns chaining and conversation mode off."""

_OFF = frozenset({"off", "0", "false", "no", "disabled"})
_ON = frozenset({"", "on", "1", "true", "yes", "enabled"})


def chaining_enabled() -> bool:
    """False when ``GEPPETTO_CHAINING`` says off; raises ``ConfigurationError`` for a value it does not know
    (a mistyped ``off`` must not leave chaining on unnoticed)."""
    value = os.environ.get(CHAINING_ENV, "").strip().lower()
    if value in _OFF:
        return False
    if value in _ON:
        return True
    raise ConfigurationError(
        f"{CHAINING_ENV}={os.environ[CHAINING_ENV]!r} is not understood: set it to 'off' to send every "
        "request stateless, or 'on' (or unset it) to allow chaining"
    )
