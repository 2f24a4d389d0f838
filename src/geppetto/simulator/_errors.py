"""Provider-shaped HTTP errors raised by the simulator's handlers."""

from __future__ import annotations

import secrets
from typing import Any

from starlette.responses import JSONResponse

_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

_INTERACTIONS_CODES = {
    400: "invalid_request",
    401: "authentication",
    403: "permission_denied",
    404: "not_found",
    413: "invalid_request",
    429: "rate_limit_exceeded",
}


class SimError(Exception):
    """An error the simulated provider answers with; rendered in the calling API's envelope."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}


def error_body(api: str, err: SimError) -> dict[str, Any]:
    """The JSON error body the provider behind `api` ("openai", "anthropic", "gemini") sends."""
    if api == "anthropic":
        etype = err.type if err.type != "invalid_request_error" else _ANTHROPIC_TYPES.get(err.status, err.type)
        return {
            "type": "error",
            "error": {"type": etype, "message": err.message},
            "request_id": "req_" + secrets.token_hex(12),
        }
    if api == "interactions":  # the Interactions API's documented codes; 5xx codes are unverified
        code = err.code or _INTERACTIONS_CODES.get(err.status, "internal" if err.status >= 500 else "invalid_request")
        return {"error": {"code": code, "message": err.message}}
    if api == "gemini":
        status = _GEMINI_STATUS.get(err.status, "INVALID_ARGUMENT" if err.status < 500 else "INTERNAL")
        return {"error": {"code": err.status, "message": err.message, "status": status}}
    return {"error": {"message": err.message, "type": err.type, "param": err.param, "code": err.code}}


def error_response(api: str, err: SimError) -> JSONResponse:
    """A JSONResponse carrying `err` in `api`'s envelope, status and headers."""
    return JSONResponse(error_body(api, err), status_code=err.status, headers=err.headers)
