"""Provider error bodies -> geppetto exceptions: each provider's error shape, and the class for a status.

An ``ErrorParser`` reads one provider's parsed error body (``openai_error_info``, ``anthropic_error_info``,
``gemini_error_info``); ``error_from_response`` builds the exception, keeping the provider's own words.
Re-exported by :mod:`geppetto.providers._http`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from geppetto._exceptions import (
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    PreviousResponseNotFoundError,
    ProviderError,
    RateLimitError,
    ServerError,
)
from geppetto._json import parse_json

__all__ = [
    "ErrorInfo",
    "ErrorParser",
    "anthropic_error_info",
    "error_from_response",
    "exception_class",
    "gemini_error_info",
    "names_missing_response",
    "openai_error_info",
    "request_id",
    "responses_create_error_info",
]

AUTH_CODES = frozenset({"API_KEY_INVALID"})
"""Error codes that mean a refused key whatever the status (Gemini answers a wrong key with 400)."""
REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-goog-request-id", "openai-request-id")


@dataclass(frozen=True)
class ErrorInfo:
    """What a provider's error body says: message, code, type and the offending parameter."""

    message: str
    code: str | None = None
    error_type: str | None = None
    param: str | None = None


ErrorParser = Callable[[Any], ErrorInfo | None]
"""Reads a parsed error body (JSON or None); returns None when the body is not that provider's shape."""


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _detail_info(detail: Any) -> ErrorInfo | None:
    """FastAPI's ``{"detail": "..."}`` (servers built on it answer so), or its validation list
    ``{"detail": [{"loc": [...], "msg": "..."}]}``."""
    if isinstance(detail, str) and detail:
        return ErrorInfo(message=detail)
    if isinstance(detail, list) and detail and all(isinstance(d, dict) for d in detail):
        parts = []
        for d in detail:
            loc = ".".join(str(p) for p in d.get("loc") or [] if p != "body")
            parts.append(f"{loc}: {d.get('msg')}" if loc else str(d.get("msg")))
        first = detail[0].get("loc") or []
        param = ".".join(str(p) for p in first if p != "body") or None
        return ErrorInfo(message="; ".join(parts), error_type=_str_or_none(detail[0].get("type")), param=param)
    return None


def openai_error_info(body: Any) -> ErrorInfo | None:
    """OpenAI: ``{"error": {"message", "type", "param", "code"}}``; also ``{"detail": ...}``, the shape of
    OpenAI-compatible servers built on FastAPI."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict) or "message" not in err:
        return _detail_info(body.get("detail")) if isinstance(body, dict) else None
    return ErrorInfo(
        message=str(err.get("message") or ""),
        code=_str_or_none(err.get("code")),
        error_type=_str_or_none(err.get("type")),
        param=_str_or_none(err.get("param")),
    )


_RESPONSE_NOT_FOUND = re.compile(r"\bresponse\b[^.]*\bnot found\b", re.IGNORECASE)


def names_missing_response(message: str) -> bool:
    """Whether an error message says a response was not found ("Response with id '...' not found")."""
    return _RESPONSE_NOT_FOUND.search(message) is not None


def responses_create_error_info(body: Any) -> ErrorInfo | None:
    """``openai_error_info`` for a request creating a response: an error without a code whose message says a
    response was not found is ``previous_response_not_found`` (the only response such a request names is
    its parent; servers other than OpenAI's send no code). A code that is only the HTTP status counts as
    none: the LiteLLM proxy re-wraps an upstream error with ``"code": "400"`` and the upstream's own code
    inside the message."""
    info = openai_error_info(body)
    uncoded = info is not None and (info.code is None or info.code.isdigit())
    if info is not None and uncoded and names_missing_response(info.message):
        return ErrorInfo(info.message, "previous_response_not_found", info.error_type, info.param)
    return info


def anthropic_error_info(body: Any) -> ErrorInfo | None:
    """Anthropic: ``{"type": "error", "error": {"type", "message"}}``; the error type doubles as the code."""
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict) or "message" not in err:
        return None
    etype = _str_or_none(err.get("type"))
    return ErrorInfo(message=str(err.get("message") or ""), code=etype, error_type=etype)


def gemini_error_info(body: Any) -> ErrorInfo | None:
    """Gemini: ``{"error": {"code": 400, "message", "status": "INVALID_ARGUMENT", "details"?}}`` (also as a one-item
    list). The code is the first ``details[].reason`` (e.g. ``API_KEY_INVALID``), else the status."""
    if isinstance(body, list) and body:
        body = body[0]
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict) or "message" not in err:
        return None
    status = _str_or_none(err.get("status"))
    # A wrong key is a 400 INVALID_ARGUMENT whose details say why: {"reason": "API_KEY_INVALID"}.
    reasons = [d.get("reason") for d in err.get("details") or [] if isinstance(d, dict) and d.get("reason")]
    code = str(reasons[0]) if reasons else status
    return ErrorInfo(message=str(err.get("message") or ""), code=code, error_type=status)


def exception_class(status: int, code: str | None = None) -> type[ProviderError]:
    """The geppetto exception class for an HTTP status (and the provider's error code)."""
    if code == "previous_response_not_found":
        return PreviousResponseNotFoundError
    if status in (401, 403) or code in AUTH_CODES:
        return AuthenticationError
    if status in (400, 413, 422):
        return BadRequestError
    if status == 404:
        return NotFoundError
    if status == 429:
        return RateLimitError
    if status >= 500:
        return ServerError
    return ProviderError


def request_id(headers: Mapping[str, str]) -> str | None:
    for name in REQUEST_ID_HEADERS:
        value = headers.get(name)
        if value:
            return value
    return None


def error_from_response(
    status: int, text: str, headers: Mapping[str, str], *, provider: str, parser: ErrorParser
) -> ProviderError:
    """Build the geppetto exception for an HTTP error answer, keeping the provider's own words."""
    try:
        body: Any = parse_json(text) if text else None
    except ValueError:  # not JSON, or nested too deep to read: the text itself
        body = text
    info = parser(body) if body is not None else None
    if info is None:
        snippet = text.strip()[:500] if text else ""
        info = ErrorInfo(message=snippet or f"HTTP {status} with an empty body")
    cls = exception_class(status, info.code)
    return cls(
        info.message,
        status=status,
        provider=provider,
        code=info.code,
        error_type=info.error_type,
        param=info.param,
        request_id=request_id(headers),
        body=body,
    )
