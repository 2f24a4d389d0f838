"""What every route of the server shares: the :class:`Api` it serves (runner, store, limits), the guarded route
class (API key, text checks, the incoming hooks, errors as JSON), JSON bodies read within their limit and
validated by a :mod:`~geppetto.server._models` model, and the error answers every route documents.

A route is a function in one of the resource modules under ``_routes`` (see ``docs/server.md``)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi.exceptions import RequestValidationError
from fastapi.params import Depends
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from .._exceptions import GeppettoError, UsageError, UsageLimitExceeded
from .._terms import for_http
from ..events.bus import BusUnavailable
from ..session import INCOMING_HOOKS
from ..session.stores import SQLTurnStore
from ..tools import ApprovalPendingError
from ._guard import MESSAGE_TEXT, BadText, check_text, client_message, error_response, json_content_type
from ._models import ErrorBody, RequestModel
from ._runner import Busy, NotFound, Runner
from ._streams import Streams

__all__ = ["ERRORS", "OPEN", "Api", "ApiError", "GuardedRoute", "api", "json_body", "read_json"]

log = logging.getLogger("geppetto.server")

M = TypeVar("M", bound=RequestModel)

OPEN: dict[str, Any] = {"security": []}
"""A route's ``openapi_extra`` for a route that needs no API key (the page, the document, liveness)."""

# Always JSON, also on a route whose own answer is a page (its 404 is JSON too).
_ERROR = {
    "model": ErrorBody,
    "description": "An error: what went wrong and how to fix it",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
}
ERRORS: dict[int | str, dict[str, Any]] = {
    code: _ERROR for code in (400, 401, 403, 404, 405, 409, 413, 415, 421, 422, 429)
}
ERRORS[503] = _ERROR
"""The error answers of an API route (every one has the :class:`ErrorBody` shape)."""


class ApiError(Exception):
    def __init__(self, status: int, message: str, kind: str) -> None:
        super().__init__(message)
        self.status, self.message, self.kind = status, message, kind


def _size(n: int) -> str:
    """``n`` bytes as a person reads a file's size (``4.2 MiB``, ``16 MiB``, ``3.9 KiB``)."""
    unit, scale = ("MiB", 1 << 20) if n >= 1 << 20 else ("KiB", 1 << 10)
    return f"{n / scale:.1f}".removesuffix(".0") + f" {unit}"


def too_large(max_body: int, size: int | None = None) -> ApiError:
    """The 413 for a body over ``max_body`` bytes (``size``: its declared size, when known): how big it was,
    the limit, that attached files count a third larger (base64) and the flag that raises the limit."""
    what = f"the request is {_size(size)} ({size:,} bytes)," if size is not None else "the request is"
    return ApiError(
        413,
        f"{what} over this server's limit of {_size(max_body)} ({max_body:,} bytes); attached files count "
        "a third larger, sent as base64. Attach smaller files, or restart the server with "
        "geppetto serve --max-body BYTES to take larger ones.",
        "body_too_large",
    )


@dataclass
class Api:
    """What the routes serve, kept on ``app.state.api``."""

    runner: Runner
    streams: Streams
    max_body: int
    api_key: str | None

    @property
    def store(self) -> SQLTurnStore:
        return self.runner.store

    def public(self, exc: BaseException, session_id: str | None = None) -> str:
        """``exc``'s message without the store's location, in an HTTP client's terms (routes, not Python
        calls; ``session_id`` fills them in)."""
        return client_message(for_http(str(exc), session_id), [self.store.location])


def api(request: Request) -> Api:
    """The :class:`Api` of the app serving ``request``."""
    the_api: Api = request.app.state.api
    return the_api


async def read_json(request: Request, max_body: int, ids: tuple[str, ...] | None = None) -> Any:
    """The request's JSON body; 413 past ``max_body`` bytes (read no further), 415 when a body is not sent
    as ``application/json``, 400 when it is not JSON, 422 for a string the stores cannot hold: anywhere in
    the body, or, for a protocol route, in its ``ids`` and its messages' roles and texts (what it keeps)."""
    content_type = request.headers.get("content-type")
    if content_type is not None and not json_content_type(content_type):
        raise _not_json(content_type)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_body:
        raise too_large(max_body, int(declared))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_body:
            raise too_large(max_body)
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    if content_type is None:
        raise _not_json(None)
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"the body is not valid JSON ({exc}); send a JSON object", "malformed_json") from None
    try:
        if ids is None or not isinstance(body, dict):
            check_text(body, "")
        else:
            for name in ids:
                check_text(body.get(name), name)
            check_text(body.get("messages"), "messages", MESSAGE_TEXT)
    except BadText as exc:
        raise ApiError(422, str(exc), "invalid_text") from None
    return body


def _not_json(content_type: str | None) -> ApiError:
    given = f"Content-Type {content_type!r}" if content_type else "no Content-Type"
    return ApiError(415, f"the body was sent with {given}; send JSON with 'Content-Type: application/json'", "not_json")


def _invalid(model: type[RequestModel], exc: ValidationError) -> ApiError:
    """The 422 for a body ``model`` refused: its unknown fields, else its first wrong field's message."""
    errors = exc.errors()
    unknown = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        return ApiError(422, f"unknown field(s) {', '.join(sorted(unknown))}; {model.takes}", "invalid_request")
    first = errors[0]
    field = str(first["loc"][0]) if first["loc"] else ""
    if first["type"] == "value_error":
        message = str(first.get("ctx", {}).get("error", first["msg"]))
    else:
        message = model.invalid.get(field) or f"{field!r}: {first['msg']}"
    return ApiError(422, message, "invalid_request")


def json_body(model: type[M]) -> Any:
    """A route parameter's ``Annotated`` dependency that reads the JSON body (:func:`read_json`'s limits) into ``model``; the
    route documents ``model`` as its request body (:class:`GuardedRoute`)."""

    async def read(request: Request) -> M:
        body = await read_json(request, api(request).max_body)
        if not isinstance(body, dict):
            raise ApiError(400, "the body must be a JSON object", "invalid_request")
        try:
            return model.model_validate(body)
        except ValidationError as exc:
            raise _invalid(model, exc) from None

    read.body_model = model  # type: ignore[attr-defined]
    return Depends(read)


def _request_body(model: type[Any]) -> dict[str, Any]:
    """``model``'s JSON Schema as an OpenAPI request body, with its ``$defs`` written in place (so the schema
    stands alone)."""
    schema = model.model_json_schema(by_alias=True)
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return {**inline(defs[ref.removeprefix("#/$defs/")]), **inline(rest)}
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    required = bool(schema.get("required"))  # a body of optional fields may be left out
    return {"required": required, "content": {"application/json": {"schema": inline(schema)}}}


def documents_body(model: type[Any]) -> dict[str, Any]:
    """The ``openapi_extra`` of a route that reads its body itself (a protocol's input), documented by ``model``."""
    return {"requestBody": _request_body(model)}


class GuardedRoute(APIRoute):
    """A route of the API: its body model (a :func:`json_body` parameter) documented as its request body;
    every request checked for the API key (unless the route is :data:`OPEN`) and for text the stores cannot
    hold in its path and query; the incoming hooks around it; errors answered as JSON."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        if self.methods and "GET" in self.methods:
            self.methods.add("HEAD")  # as Starlette's routes do (the document leaves it out)
        for dependency in self.dependant.dependencies:
            model = getattr(dependency.call, "body_model", None)
            if model is not None:
                self.openapi_extra = {**(self.openapi_extra or {}), "requestBody": _request_body(model)}

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        open_route = (self.openapi_extra or {}).get("security") == []
        params = {p.alias: p for p in [*self.dependant.path_params, *self.dependant.query_params]}

        async def guarded(request: Request) -> Response:
            the_api: Api = request.app.state.api
            key = the_api.api_key
            if key and not open_route and request.headers.get("authorization", "") != f"Bearer {key}":
                return error_response(
                    401, "missing or wrong API key: send 'Authorization: Bearer <key>'", "unauthorized"
                )
            try:
                for name, value in [*request.path_params.items(), *request.query_params.items()]:
                    check_text(value, name)
            except BadText as exc:
                return error_response(422, str(exc), "invalid_text")
            try:
                with contextlib.ExitStack() as hooks:
                    for hook in INCOMING_HOOKS:
                        hooks.enter_context(hook(request.headers))
                    return await handler(request)
            except RequestValidationError as exc:  # a path or query parameter: its description says what it takes
                name = str(exc.errors()[0]["loc"][-1])
                field = params.get(name)
                takes = field.field_info.description if field is not None else None
                return error_response(422, f"{name!r} must be {takes or 'valid'}", "invalid_request")
            except Exception as exc:
                return _error(request, exc, the_api)

        return guarded


def _error(request: Request, exc: Exception, the_api: Api) -> Response:
    """The JSON answer of a route that raised ``exc`` (re-raised when it is not one the API answers)."""
    where = f"{request.method} {request.url.path}"
    session_id = request.path_params.get("session_id")
    if isinstance(exc, ApiError):
        return error_response(exc.status, client_message(exc.message), exc.kind)
    if isinstance(exc, NotFound):
        return error_response(404, the_api.public(exc), "not_found")
    if isinstance(exc, Busy):
        return error_response(409, the_api.public(exc), "session_busy")
    if isinstance(exc, ApprovalPendingError):
        log.info("request %s refused: %s", where, exc)
        return error_response(409, the_api.public(exc, session_id), "approval_pending")
    if isinstance(exc, UsageLimitExceeded):
        log.info("request %s refused: %s", where, exc)
        return error_response(429, the_api.public(exc, session_id), "usage_limit_reached")
    if isinstance(exc, UsageError):
        log.info("request %s refused: %s", where, exc)
        return error_response(409, the_api.public(exc, session_id), "conflict")
    if isinstance(exc, BusUnavailable):  # the broker is down or restarting: the client tries again later
        log.warning("request %s failed: %s", where, exc)
        return error_response(503, the_api.public(exc), "unavailable")
    if isinstance(exc, GeppettoError):
        log.exception("request %s failed", where)
        return error_response(503, the_api.public(exc), "unavailable")
    raise exc
