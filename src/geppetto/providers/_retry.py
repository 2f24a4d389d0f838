"""When a request is tried again and how long to wait first: the retry policy and the server's hints."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["RETRYABLE_STATUSES", "RetryPolicy", "retry_delay_from_headers", "should_retry"]

RETRYABLE_STATUSES = frozenset({408, 409, 429, 529})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry: ``delay = initial * 2**attempt`` capped at ``max_delay``, plus jitter."""

    max_retries: int = 2
    initial_delay: float = 0.5
    max_delay: float = 8.0
    jitter: float = 0.25
    max_server_delay: float = 60.0

    def backoff(self, attempt: int) -> float:
        """The delay before retry number ``attempt`` (0-based) when the server gave no hint."""
        base = min(self.max_delay, self.initial_delay * (2**attempt))
        return float(base * (1 - self.jitter * random.random()))


def should_retry(status: int, headers: Mapping[str, str]) -> bool:
    """True for 408, 409, 429, 5xx and 529, unless the server says ``x-should-retry: false`` (and vice versa)."""
    hint = (headers.get("x-should-retry") or "").strip().lower()
    if hint == "true":
        return True
    if hint == "false":
        return False
    return status in RETRYABLE_STATUSES or status >= 500


def retry_delay_from_headers(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The server's requested wait in seconds from ``retry-after-ms`` or ``retry-after``, or None."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
