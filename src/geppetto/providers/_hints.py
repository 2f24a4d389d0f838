"""A provider error with the fix named after its message: the key to set, the model name to check, the
request to shorten."""

from __future__ import annotations

from .._exceptions import AuthenticationError, NotFoundError, ProviderError

__all__ = ["TOO_LARGE", "key_hint", "reworded", "too_large_hint", "with_fix", "with_hint"]


def key_hint(env_names: tuple[str, ...], *, sent: bool) -> str:
    """What to do about a refused key: which argument or environment variable to set."""
    names = " or ".join(env_names)
    if not sent:
        return f"no API key was sent: pass api_key=... or set the {names} environment variable"
    return f"check the key passed as api_key= or set in {names}"


def with_fix(exc: ProviderError, model: str, key: str) -> ProviderError:
    """Name the fix: a 404 on a generation call almost always means a wrong model name (or base URL); a refused
    key means the key to set."""
    if isinstance(exc, NotFoundError):
        return with_hint(exc, f"check the model name {model!r} and the base URL")
    if isinstance(exc, AuthenticationError) and key:
        return with_hint(exc, key)
    return too_large_hint(exc)


TOO_LARGE = (
    "the request is larger than the server takes: shorten the Turn, or bound tool results with "
    "tool_loop(max_result_chars=...) (Session(..., tool_loop_options={'max_result_chars': ...}))"
)


def too_large_hint(exc: ProviderError) -> ProviderError:
    """A 413 (request too large) with the fix named; any other error as it is."""
    return with_hint(exc, TOO_LARGE) if exc.status == 413 else exc


def with_hint(exc: ProviderError, hint: str) -> ProviderError:
    """``exc`` with ``hint`` (the fix, e.g. from :func:`key_hint`) after its message."""
    return reworded(exc, f"{exc.message} ({hint})")


def reworded(exc: ProviderError, message: str) -> ProviderError:
    """``exc`` (its class, status, code and body kept) saying ``message`` instead."""
    return type(exc)(
        message,
        status=exc.status,
        provider=exc.provider,
        code=exc.code,
        error_type=exc.error_type,
        param=exc.param,
        request_id=exc.request_id,
        body=exc.body,
    )
