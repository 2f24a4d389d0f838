"""The app of ``geppetto serve``: the REST API, Server-Sent Events resumable by id, AG-UI and the Vercel AI
SDK stream, the web front-end, JSON errors for every failure. The routes live in ``_routes``, one module per
resource; this module puts them together."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from ._api import Api
from ._guard import Guard, allowed_methods, error_response
from ._routes import events, protocols, sessions, web
from ._runner import Runner
from ._streams import Streams

__all__ = ["DEFAULT_MAX_BODY", "KEEPALIVE_SECONDS", "build_app"]

log = logging.getLogger("geppetto.server")

DEFAULT_MAX_BODY = 16 << 20
"""The largest request body taken by default: 16 MiB, so a prompt can carry a typical PDF (about 12 MiB
before base64 makes it a third larger)."""
KEEPALIVE_SECONDS = 15.0
"""Seconds of quiet after which an event stream sends a keep-alive comment."""

ROUTERS = (sessions.router, events.router, protocols.router, web.router)
"""Every resource's routes, in the order they are matched."""


def build_app(
    runner: Runner,
    *,
    api_key: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    lifespan: Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]] | None = None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
) -> FastAPI:
    """The app over ``runner`` (its store and bus). ``api_key``: every ``/api`` and ``/ag-ui`` request
    must carry ``Authorization: Bearer <api_key>``. ``allowed_hosts``: the names clients reach the server
    by, besides the loopback names (``*``: any); ``allowed_origins``: the other sites whose pages may use
    it (CORS is answered for those only). See :class:`~geppetto.server._guard.Guard`."""
    app = FastAPI(
        title="geppetto serve",
        version="1",
        description=(
            "Sessions over HTTP: REST with resumable Server-Sent Events, AG-UI and the Vercel AI SDK stream. "
            "The guide is the page Guides > Server of geppetto's documentation site."
        ),
        openapi_url=None,  # served by the web routes, with the API key's security
        docs_url=None,
        redoc_url=None,
        middleware=[Middleware(Guard, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)],
        exception_handlers={HTTPException: _http_error, Exception: _http_error},
        lifespan=lifespan,
    )
    for router in ROUTERS:  # the routes themselves: each is complete (its responses, its guard)
        app.router.routes.extend(router.routes)
    app.state.api = Api(runner, Streams(runner.bus, KEEPALIVE_SECONDS), max_body, api_key)
    return app


async def _http_error(request: Request, exc: Exception) -> Response:
    """No route, a method the route does not take, or a failure no route answered."""
    if isinstance(exc, HTTPException):
        if exc.status_code == 404:
            return error_response(
                404, f"no route {request.method} {request.url.path}; see /openapi.json for the API", "not_found"
            )
        if exc.status_code == 405:
            allow = allowed_methods(request.app.routes, request.url.path)
            return error_response(
                405,
                f"{request.method} is not allowed on {request.url.path} (it takes {allow}); see /openapi.json",
                "bad_method",
                headers={"allow": allow},
            )
        return error_response(exc.status_code, str(exc.detail), "http_error")
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, f"internal error: {type(exc).__name__}; the server log has the details", "internal")
