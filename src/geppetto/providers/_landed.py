"""Finding out what an earlier attempt left on the server before anything is sent again.

A request that failed after it went out may have reached the server: the server may have stored a response,
an interaction or a conversation's new items although the client never read the answer. Sending it again
would pay for a second answer and, with tools, run them twice. So every retry point asks first:

- a response or interaction whose id is known (from its first event, or a background answer) is read back
  with ``GET`` (:func:`await_landed`) and waited for while it is still in progress, instead of being created
  again; the server's answer that it does not hold it (404) proves the attempt did not land;
- a transport retry of a request that may have reached the server asks its caller's :data:`LandedCheck`
  (a conversation's items after the last known one, for a Responses conversation request);
- where nothing can be proven (a stateless provider: Chat Completions, Claude, Gemini ``generateContent``;
  a chained request whose id never arrived) the request is sent again, said in the log and counted in
  ``geppetto_requests_retried_unknown_outcome`` (:func:`retried_unknown`).

See docs/responses.md ("What a retry sends").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from geppetto._exceptions import NotFoundError, ProviderError

__all__ = [
    "ACTIVE_STATUSES",
    "MAX_WAIT",
    "SAFE_TO_RESEND",
    "LandedCheck",
    "NotLanded",
    "await_landed",
    "may_have_landed",
    "retried_unknown",
]

log = logging.getLogger("geppetto.providers")

ACTIVE_STATUSES = frozenset({"queued", "in_progress"})
"""Statuses of a response or interaction the server is still generating."""

MAX_WAIT = 600.0
"""Seconds of polls (``poll_interval`` apart) a response read back is waited for while it stays in progress:
the engines' default request timeout."""

LandedCheck = Callable[[], Awaitable[bool | None]]
"""Asked before a request that may have reached the server is sent again: True when it landed (it is not
sent again; the transport raises), False when it provably did not (it is sent again), None when nothing
can be proven (it is sent again, logged and counted)."""


async def _resend_safe() -> bool:
    return False


SAFE_TO_RESEND: LandedCheck = _resend_safe
"""The check of a POST that acts the same however often it lands (a cancel, a token count): it is sent again
as a GET would be, neither logged nor counted."""

_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Failures before any byte of the request went out: such an attempt cannot have landed."""


class NotLanded(ProviderError):
    """Reading back an earlier attempt's response showed the server does not hold it: it did not land."""


def may_have_landed(method: str, exc: httpx.TransportError) -> bool:
    """Whether a request that failed with ``exc`` may have been received and acted on: a request that
    changes something (not GET) whose bytes went out (the failure is not a refused or timed-out connect)."""
    return method.upper() not in ("GET", "HEAD", "OPTIONS") and not isinstance(exc, _NOT_SENT)


async def await_landed(
    get: Callable[[], Awaitable[Any]],
    what: str,
    ident: str,
    *,
    poll_interval: float,
    max_wait: float = MAX_WAIT,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> dict[str, Any]:
    """``what`` (``response resp_1``) read back with ``get()``, polled every ``poll_interval`` seconds while it
    is still in progress (``max_wait`` seconds of polls at most: then ``ProviderError``); raises
    :class:`NotLanded` when the server answers that it does not hold it: a 404 whose message names ``ident``
    (a 404 that does not may be a server without the route, which proves nothing: ``ProviderError``)."""
    waited = 0
    while True:
        try:
            found = await get()
        except NotFoundError as exc:
            if ident not in str(exc.message or ""):
                raise ProviderError(f"reading back {what} answered 404 without naming it ({exc.message})") from exc
            raise NotLanded(f"{what} is not on the server ({exc.message})", status=404) from exc
        if not isinstance(found, dict):
            raise ProviderError(f"reading back {what} answered without an object")
        status = str(found.get("status") or "")
        if status not in ACTIVE_STATUSES:
            log.info("%s landed (status %s): read back instead of sent again", what, status or "?")
            return found
        if not waited:
            log.info("%s is still %s on the server: waiting for it instead of sending it again", what, status)
        if waited * poll_interval >= max_wait:
            raise ProviderError(f"{what} was still {status} after {max_wait:g} s of polling")
        waited += 1
        await sleep(poll_interval)


def retried_unknown(provider: str, what: str, reason: str, why: str = "") -> None:
    """Log and count a request sent again although its earlier attempt may have reached the server and
    nothing could prove it did not (``why``: what was missing): the provider may answer, and charge for, both."""
    log.warning(
        "%s: %s failed (%s), perhaps after it reached the server; sending it again with the outcome of the "
        "first attempt unknown (%s)",
        provider,
        what,
        reason,
        why or "nothing the client holds can show whether it landed",
    )
    from ._stateful import metrics  # the process-wide counters (imported late: no cycle)

    metrics.retried_unknown(provider)
