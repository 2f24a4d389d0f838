"""What the server checks before any handler runs, and what it lets out of an error.

A key-less server on loopback is still reachable from every page the user's browser opens: a page on
another site can POST to it (a ``text/plain`` body needs no preflight) and a DNS-rebinding page reads it
under its own name. So every request must name an allowed host (``Host``), every state-changing request
from a browser must come from the server's own origin or an allowed one (``Origin``), and JSON bodies must
say they are JSON (``Content-Type``), which a cross-site form or ``no-cors`` fetch cannot. CORS headers are
sent only to the origins a deployment allows. Messages that reach clients carry no credentials and no
server paths; text the stores cannot hold (NUL, lone surrogates) is refused up front, naming the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._redact import redact_secrets, redact_url
from .._terms import for_http

__all__ = [
    "LOOPBACK_HOSTS",
    "MESSAGE_TEXT",
    "BadText",
    "Guard",
    "allowed_methods",
    "check_text",
    "client_message",
    "error_response",
    "json_content_type",
    "public_event",
]

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
"""The names a request may always give in ``Host`` (with any port)."""

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
UNGUARDED_PATHS = frozenset({"/healthz"})
"""Answered whatever the ``Host``: liveness probes address a worker by its IP."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
_PREFLIGHT_MAX_AGE = "600"


def error_response(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON error every refusal and failure answers with."""
    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status, headers=headers)


def _host_entry(name: str) -> str:
    """An allowed-host entry as it compares with a ``Host`` header: lower case, an IPv6 address bracketed."""
    name = name.strip().lower().rstrip(".")
    return f"[{name}]" if name.count(":") > 1 and not name.startswith("[") else name


def _split_host(host: str) -> tuple[str, str | None]:
    """``Host`` as (name, port or None); the name lower case, an IPv6 address kept in brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        name, _, rest = host.partition("]")
        return f"{name}]", rest[1:] if rest.startswith(":") else None
    name, colon, port = host.partition(":")
    return name.rstrip("."), port if colon else None


def _origin_entry(origin: str) -> str:
    return origin.strip().lower().rstrip("/")


def _same_origin(origin: str, host: str) -> bool:
    """Whether ``origin`` (``scheme://host[:port]``) names the host and port of the ``Host`` header."""
    try:
        parts = urlsplit(origin)
        origin_port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return False
    if parts.hostname is None:
        return False
    origin_name = _host_entry(parts.hostname)
    name, port = _split_host(host)
    try:
        host_port = int(port) if port else _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return False
    return origin_name == name and origin_port == host_port


class Guard:
    """ASGI middleware: refuses a ``Host`` outside ``allowed_hosts`` (421), a state-changing request whose
    ``Origin`` is neither the server's own nor in ``allowed_origins`` (403), and answers CORS (preflight
    and response headers) for ``allowed_origins`` only.

    ``allowed_hosts``: names (``example.com``, any port) or ``name:port``, besides :data:`LOOPBACK_HOSTS`;
    ``*`` allows any. ``allowed_origins``: ``scheme://host[:port]``; ``*`` allows any."""

    def __init__(self, app: ASGIApp, *, allowed_hosts: Sequence[str] = (), allowed_origins: Sequence[str] = ()) -> None:
        self.app = app
        self.hosts = {_host_entry(h) for h in (*LOOPBACK_HOSTS, *allowed_hosts) if h.strip()}
        self.origins = {_origin_entry(o) for o in allowed_origins if o.strip()}

    def host_allowed(self, host: str) -> bool:
        if "*" in self.hosts:
            return True
        name, port = _split_host(host)
        return name in self.hosts or (port is not None and f"{name}:{port}" in self.hosts)

    def cors_allowed(self, origin: str) -> bool:
        """Whether ``origin`` is one of the configured origins (CORS is answered for those only)."""
        return "*" in self.origins or _origin_entry(origin) in self.origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNGUARDED_PATHS:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if not self.host_allowed(host):
            name = _split_host(host)[0] or "(none)"
            await error_response(
                421,
                f"this server does not answer to the host {name!r}; if clients reach it by that name, start it "
                f"with --allowed-host {name} (GEPPETTO_SERVER_ALLOWED_HOSTS, create_app(allowed_hosts=[...]))",
                "host_not_allowed",
            )(scope, receive, send)
            return
        origin = headers.get("origin")
        method = scope["method"]
        cors = origin is not None and self.cors_allowed(origin)
        if method == "OPTIONS" and origin is not None and "access-control-request-method" in headers:
            await self._preflight(origin, cors, headers)(scope, receive, send)
            return
        if method in STATE_CHANGING and origin is not None and not cors and not _same_origin(origin, host):
            await error_response(
                403,
                f"requests from the origin {origin!r} are refused; if a front-end there should use this server, "
                f"start it with --allowed-origin {origin} (GEPPETTO_SERVER_ALLOWED_ORIGINS, "
                "create_app(allowed_origins=[...]))",
                "origin_not_allowed",
            )(scope, receive, send)
            return
        if not cors or origin is None:
            await self.app(scope, receive, send)
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                out = MutableHeaders(scope=message)
                out["access-control-allow-origin"] = origin
                out.add_vary_header("Origin")
            await send(message)

        await self.app(scope, receive, send_with_cors)

    def _preflight(self, origin: str, allowed: bool, headers: Headers) -> Response:
        if not allowed:
            return error_response(
                403,
                f"cross-origin requests from {origin!r} are refused; if a front-end there should use this server, "
                f"start it with --allowed-origin {origin}",
                "origin_not_allowed",
            )
        answer = {
            "access-control-allow-origin": origin,
            "access-control-allow-methods": "GET, POST, DELETE",
            "access-control-max-age": _PREFLIGHT_MAX_AGE,
            "vary": "Origin",
        }
        if requested := headers.get("access-control-request-headers"):
            answer["access-control-allow-headers"] = requested
        return Response(status_code=204, headers=answer)


def json_content_type(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` says JSON: ``application/json`` or ``application/*+json``, any parameters."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class BadText(ValueError):
    """A string the stores cannot hold; the message names the field."""


def _text_fault(text: str) -> str | None:
    if "\x00" in text:
        return "holds a NUL character (\\u0000), which the session store cannot keep; remove it"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate (such as \\ud800), which is not Unicode text; send text that encodes as UTF-8"
    return None


MESSAGE_TEXT = frozenset({"role", "text", "content"})
"""What the protocol routes keep of a message: its role and text (the rest is the client's own)."""


def check_text(value: Any, field: str, keys: frozenset[str] | None = None) -> None:
    """:class:`BadText` naming the first string (key or value) under ``value`` that holds a NUL or a lone
    surrogate; ``field`` names ``value`` itself (``messages[0].parts[0].text`` style below it). ``keys``:
    check only the strings held under these keys (and no field names)."""
    stack: list[tuple[str, Any]] = [(field, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            if (keys is None or where.rpartition(".")[2] in keys) and (fault := _text_fault(item)):
                raise BadText(f"{repr(where) if where else 'the body'} {fault}")
        elif isinstance(item, dict):
            for key, sub in reversed(item.items()):
                name = f"{where}.{key}" if where else str(key)
                if keys is None and (fault := _text_fault(str(key))):
                    raise BadText(f"a field name in {where or 'the body'!r} {fault}")
                stack.append((name, sub))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", sub) for i, sub in reversed(list(enumerate(item))))


def client_message(text: str, locations: Iterable[str] = ()) -> str:
    """``text`` fit for a client: credentials redacted and the server's own ``locations`` (a store's file
    path or address) named only as "the server's session store"; the full text goes to the server log."""
    text = redact_secrets(text)
    for location in locations:
        if location:
            shown = redact_url(location)
            text = text.replace(f"session store {shown}", "session store").replace(shown, "the server's session store")
    return text


def public_event(data: dict[str, Any], session_id: str | None = None) -> dict[str, Any]:
    """A bus event as it goes to a client: its ``error`` and ``message`` texts with credentials redacted
    (an inference's failure quotes whatever raised it) and in an HTTP client's terms (routes of
    ``session_id``, not Python calls)."""
    changed = {
        key: for_http(redact_secrets(data[key]), session_id)
        for key in ("error", "message")
        if isinstance(data.get(key), str)
    }
    return {**data, **changed} if any(changed[k] != data[k] for k in changed) else data


def allowed_methods(routes: Iterable[BaseRoute], path: str) -> str:
    """The ``Allow`` header for ``path``: the methods of every route that matches it."""
    methods: set[str] = set()
    for route in routes:
        if isinstance(route, Route) and route.methods and route.path_regex.match(path):
            methods |= route.methods
    return ", ".join(sorted(methods))
