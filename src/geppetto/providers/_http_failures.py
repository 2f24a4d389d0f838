"""What went wrong with a request, in words: no answer (refused, unreachable, which timeout after how long),
a stream that broke off, an answer that is not the stream asked for, and an error answer's body."""

from __future__ import annotations

import httpx

__all__ = ["broken_off", "error_body", "not_a_stream", "unanswered"]


async def error_body(response: httpx.Response) -> str:
    """An error answer's body as text; "" when it broke off (the status still says what happened)."""
    try:
        return (await response.aread()).decode("utf-8", errors="replace")
    except httpx.TransportError:
        return ""
    finally:
        await response.aclose()


def not_a_stream(response: httpx.Response, head: bytes) -> str:
    """Why a 2xx answer with no event in it is not the stream asked for, quoting how it began."""
    kind = response.headers.get("content-type") or "no content type"
    shown = head.decode("utf-8", errors="replace")
    body = f"it began {shown!r}" if shown else "its body was empty"
    return f"{response.request.url} answered with {kind} and no event where an event stream was asked for ({body})"


def broken_off(exc: httpx.HTTPError) -> str:
    """Why a stream broke off, in words: a read timeout says how long nothing came and how to wait longer."""
    if isinstance(exc, httpx.ReadTimeout):
        read = _timeout_of(exc, "read")
        waited = f"no data for {read:g} s" if read is not None else "no data in time"
        return f"{waited} (read timeout); {_WAIT_LONGER}"
    return str(exc) or type(exc).__name__


_WAIT_LONGER = "to wait longer pass the engine timeout=<seconds> (or httpx.Timeout(..., read=...))"


def unanswered(exc: httpx.TransportError, url: str, attempts: int) -> str:
    """Why a request got no answer: refused, unreachable, or timed out (which timeout, after how long)."""
    tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
    if isinstance(exc, httpx.ReadTimeout):
        read = _timeout_of(exc, "read")
        within = f"within {read:g} s " if read is not None else ""
        return f"{url} sent no answer {within}(read timeout, {tries}); {_WAIT_LONGER}"
    if isinstance(exc, httpx.TimeoutException):
        kind = {httpx.ConnectTimeout: "connect", httpx.WriteTimeout: "write", httpx.PoolTimeout: "pool"}.get(
            type(exc), "a"
        )
        seconds = _timeout_of(exc, kind)
        within = f" within {seconds:g} s" if seconds is not None else ""
        return f"could not reach {url}{within} ({kind} timeout, {tries}); check the base URL and the network"
    reason = str(exc) or type(exc).__name__
    return f"could not reach {url} ({reason}, {tries}); check the base URL and the network"


def _timeout_of(exc: httpx.HTTPError, kind: str) -> float | None:
    """The ``kind`` timeout the failed request ran under, when httpx recorded it."""
    if not _has_request(exc):
        return None
    value = exc.request.extensions.get("timeout", {}).get(kind)
    return float(value) if isinstance(value, int | float) else None


def _has_request(exc: httpx.HTTPError) -> bool:
    try:
        exc.request  # noqa: B018 - raises RuntimeError when httpx set none
    except RuntimeError:
        return False
    return True
