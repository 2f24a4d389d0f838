"""The ASGI application: request recording, auth, body parsing, fault selection, error envelopes."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket

from . import _anthropic, _background, _chat, _conversations, _gemini, _interactions, _interactions_stream, _openai
from ._call import Call, Handler
from ._errors import SimError, error_response
from ._faults import FAULT_HEADER, Fault, SSEStream, parse_fault, pause
from ._jsontext import decode, has_surrogate_literal, position, unpaired_surrogate
from ._models_list import list_gemini_models, list_models
from ._openai_count import count_input_tokens
from ._openai_ws import serve_responses_socket
from ._quirks import detail_body, shapes_path
from ._state import RecordedRequest, SimState

DEFAULT_MAX_BODY = 32 * 1024 * 1024
_OPENAI_NO_KEY = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer "
    "auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (i.e. username: YOUR_KEY) in your "
    "HTTP basic auth."
)
_OPENAI_BAD_JSON = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP "
    "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"
)
_GEMINI_NO_KEY = (
    "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or "
    "other form of API consumer identity to call this API."
)


def _check_auth(api: str, request: Request) -> None:
    headers = request.headers
    if api == "openai":
        auth = headers.get("authorization", "")
        if not auth.lower().startswith("bearer ") or not auth[7:].strip():
            raise SimError(401, _OPENAI_NO_KEY)
    elif api == "anthropic":
        if not headers.get("x-api-key") and not headers.get("authorization"):
            raise SimError(401, "x-api-key header is required", type="authentication_error")
    elif not headers.get("x-goog-api-key") and not request.query_params.get("key"):
        raise SimError(403, _GEMINI_NO_KEY)


async def _read_body(request: Request, limit: int) -> tuple[bytes, int]:
    """The body (empty once over `limit`) and its real size; an oversize body is drained, not kept."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size <= limit:
            chunks.append(chunk)
    return (b"".join(chunks) if size <= limit else b""), size


def _bad_json(api: str, detail: str = "") -> SimError:
    if api == "openai":
        return SimError(400, _OPENAI_BAD_JSON)
    if api in ("gemini", "interactions"):
        return SimError(400, "Invalid JSON payload received. Unexpected token.")
    if detail:
        return SimError(400, f"The request body is not valid JSON: {detail}")
    return SimError(400, "There was an error parsing the body of your request as JSON.")


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _loads(raw: bytes) -> tuple[Any, str | None]:
    """The parsed body and None, or None and what is wrong ("" when only "malformed" can be said).

    Nesting too deep for the parser, NaN and Infinity (which Python's parser takes but JSON does not have),
    and surrogates that do not pair up (which Python's parser takes but the services' do not, and which
    could not be encoded back) count as malformed.
    """
    try:
        body = json.loads(raw, parse_constant=_not_json)
        text = decode(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None, ""
    problem = unpaired_surrogate(text)
    if problem is not None:
        return None, f"{problem[0]}: {position(text, problem[1])}"
    if has_surrogate_literal(text):
        return None, ""
    return body, None


def _parse(api: str, raw: bytes, method: str) -> Any:
    if method in ("GET", "DELETE") and not raw:
        return None
    body, problem = _loads(raw)
    if problem is not None:
        raise _bad_json(api, problem)
    if method == "POST" and not isinstance(body, dict):
        raise SimError(400, "The request body must be a JSON object.")
    return body


class _Cut:
    """Run a complete response but cut the connection halfway through its body (a dropped non-stream answer)."""

    def __init__(self, app: ASGIApp, fault: Fault, state: SimState) -> None:
        self.app = app
        self.fault = fault
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.fault.stall_after is not None:
            await pause(self.fault.stall_seconds, lambda: self.state.closing)

        async def cut(message: Message) -> None:
            if message["type"] == "http.response.body":
                body = message.get("body", b"")
                await send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})
                raise _Dropped
            await send(message)

        with contextlib.suppress(_Dropped):
            await self.app(scope, receive, cut)


class _Dropped(Exception):
    pass


def endpoint(
    state: SimState, api: str, handler: Handler, *, generation: bool = False, max_body: int, bodyless: bool = False
) -> Callable[[Request], Awaitable[Any]]:
    """Wrap an API handler: record the request, check auth, parse the body, apply faults, render errors.

    ``bodyless``: a POST that may come without a body (``/responses/{id}/cancel``)."""

    async def run(request: Request) -> Any:
        raw, size = await _read_body(request, max_body)
        recorded = _record(request, _loads(raw)[0] if raw else None, size)
        state.record(recorded)
        try:
            if "no-conversations" in state.quirks and request.url.path.startswith("/v1/conversations"):
                raise SimError(404, f"Invalid URL ({request.method} {request.url.path})")
            if size > max_body:
                raise SimError(
                    413, f"Request body is {size} bytes; the limit is {max_body} bytes. Send a smaller request."
                )
            _check_auth(api, request)
            body = None if bodyless and not raw else _parse(api, raw, request.method)
            fault = _fault(state, request) if generation else None
            if fault is not None:
                if fault.forget:
                    state.forget(fault.forget)
                err = fault.error(api)
                if err is not None:
                    raise err
            app = await handler(Call(request, body, state, fault, api, recorded.effects))
            return _with_fault(app, fault, state)
        except SimError as err:
            return _error(state, request, api, err)
        except RecursionError:
            # Parseable but nested too deeply for the checks: as malformed as unparseable JSON.
            return _error(state, request, api, _bad_json(api))

    return run


def _error(state: SimState, request: Request, api: str, err: SimError) -> Response:
    """`err` in `api`'s envelope, or as ``{"detail": ...}`` on the Responses API under ``detail-errors``."""
    if "detail-errors" in state.quirks and shapes_path(request.url.path):
        return JSONResponse(detail_body(err.message), status_code=err.status, headers=err.headers)
    return error_response(api, err)


def _fault(state: SimState, request: Request) -> Fault | None:
    header = request.headers.get(FAULT_HEADER)
    if header:
        return parse_fault(header)
    return state.next_fault()


def _with_fault(app: ASGIApp, fault: Fault | None, state: SimState) -> ASGIApp:
    if fault is None or isinstance(app, (SSEStream, _background.RunStream)):  # streams apply their own faults
        return app
    if fault.drop_after is not None or fault.stall_after is not None:
        return _Cut(app, fault, state)
    if fault.slow_first_byte:
        delay = fault.slow_first_byte

        async def slow(scope: Scope, receive: Receive, send: Send) -> None:
            await pause(delay, lambda: state.closing)
            await app(scope, receive, send)

        return slow
    return app


def _record(request: Request, body: Any, size: int) -> RecordedRequest:
    return RecordedRequest(
        method=request.method,
        path=request.url.path,
        body=body,
        size=size,
        headers={k.lower(): v for k, v in request.headers.items()},
        query=dict(request.query_params),
    )


def _api_for_path(path: str) -> str:
    if path.startswith("/v1/messages"):
        return "anthropic"
    if path.startswith(("/v1beta/interactions", "/v1/interactions")):
        return "interactions"
    if path.startswith("/v1beta"):
        return "gemini"
    return "openai"


def _http_error(state: SimState) -> Callable[[Request, Exception], Awaitable[Response]]:
    """The handler for requests no route takes (and for unexpected failures), in the path's API's terms."""

    async def handle(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        path = request.url.path
        api = _api_for_path(path)
        server_error = Fault(status=500).error(api) if status >= 500 else None
        if server_error is not None:
            return _error(state, request, api, server_error)
        return _error(state, request, api, SimError(status, f"Invalid URL ({request.method} {path})"))

    return handle


def _models_route(state: SimState, max_body: int) -> Callable[[Request], Awaitable[Any]]:
    """GET /v1/models is OpenAI's, Anthropic's and Gemini's v1 path: Anthropic's version header or Gemini's
    key (header or ``key`` parameter) picks that API's key check and shape; else OpenAI's."""
    openai = endpoint(state, "openai", list_models, max_body=max_body)
    anthropic = endpoint(state, "anthropic", list_models, max_body=max_body)
    gemini = endpoint(state, "gemini", list_gemini_models, max_body=max_body)

    async def run(request: Request) -> Any:
        if "anthropic-version" in request.headers:
            return await anthropic(request)
        if "x-goog-api-key" in request.headers or "key" in request.query_params:
            return await gemini(request)
        return await openai(request)

    return run


def _interaction_routes(r: Callable[..., Route]) -> list[Route]:
    """The Interactions API under v1 (the SDK's default) and v1beta (the REST examples')."""
    routes = []
    for base in ("/v1/interactions", "/v1beta/interactions"):
        one = base + "/{interaction_id}"
        routes += [
            r(base, "interactions", _interactions_stream.create_interaction, ["POST"], generation=True),
            r(one, "interactions", _interactions_stream.get_interaction, ["GET"]),
            r(one, "interactions", _interactions.delete_interaction, ["DELETE"]),
            r(one + "/cancel", "interactions", _interactions_stream.cancel_interaction, ["POST"], bodyless=True),
        ]
    return routes


def build_app(state: SimState, *, max_body: int = DEFAULT_MAX_BODY) -> Starlette:
    """The simulator's Starlette app over `state`."""

    def r(path: str, api: str, handler: Handler, methods: list[str], generation: bool = False, **kw: Any) -> Route:
        return Route(
            path, endpoint(state, api, handler, generation=generation, max_body=max_body, **kw), methods=methods
        )

    async def responses_socket(websocket: WebSocket) -> None:
        await serve_responses_socket(state, websocket)

    routes: list[Route | WebSocketRoute] = [
        r("/v1/responses", "openai", _openai.create_response, ["POST"], generation=True),
        WebSocketRoute("/v1/responses", responses_socket),
        r("/v1/responses/compact", "openai", _openai.compact_response, ["POST"]),
        r("/v1/responses/input_tokens", "openai", count_input_tokens, ["POST"]),
        r("/v1/responses/{response_id}", "openai", _background.get_response, ["GET"]),
        r("/v1/responses/{response_id}/cancel", "openai", _background.cancel_response, ["POST"], bodyless=True),
        r("/v1/responses/{response_id}", "openai", _openai.delete_response, ["DELETE"]),
        r("/v1/responses/{response_id}/input_items", "openai", _openai.list_input_items, ["GET"]),
        r("/v1/chat/completions", "openai", _chat.create_chat_completion, ["POST"], generation=True),
        r("/v1/messages", "anthropic", _anthropic.create_message, ["POST"], generation=True),
        r("/v1/messages/count_tokens", "anthropic", _anthropic.count_tokens, ["POST"]),
        Route("/v1/models", _models_route(state, max_body), methods=["GET"]),
        r("/v1beta/models", "gemini", list_gemini_models, ["GET"]),
        r("/v1beta/models/{target:path}", "gemini", _gemini.generate, ["POST"], generation=True),
        r("/v1/models/{target:path}", "gemini", _gemini.generate, ["POST"], generation=True),
        *_conversations.routes(r),
        *_interaction_routes(r),
    ]
    handler = _http_error(state)
    return Starlette(routes=routes, exception_handlers={HTTPException: handler, Exception: handler})
