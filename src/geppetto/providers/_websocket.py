"""The Responses API's WebSocket mode: one long-lived connection to ``/v1/responses`` per engine.

Each request goes out as a ``response.create`` message (the HTTP body without ``stream``, ``stream_options``
and ``background``) and its answer comes back as the SSE stream's events, one JSON message each; they are
handed on as :class:`~geppetto.providers._http.SSEEvent` objects, so the stream decoder of the HTTP path
reads them unchanged. One response runs at a time per connection (the service's rule): requests wait
their turn.

State that lives on the socket only (``store: false``): the server keeps a connection's latest response in
memory and forgets it when the connection ends. So every response's blocks record the connection that made
it (:data:`BLOCK_META_CONNECTION`) and :meth:`ResponsesSocket.lost` tells the engine, before it sends, that
an anchor made on a connection that is gone can no longer be chained on (the engine then sends the whole
Turn, fallback ``connection_state_lost``). A stored response (``store: true``) chains from any connection.

A connection is (re)opened on use: first use, after the server closed it, after ``idle_timeout`` seconds
without a request (closed by the client), when it is older than ``max_age`` (the service closes it at
60 minutes), or on another event loop. Errors the server sends before a response began become the typed
errors the HTTP path raises (``previous_response_not_found``, 4xx, 5xx); a connection that closes while an
answer streams is a :class:`~geppetto.StreamError`, one that cannot be opened a
:class:`~geppetto.ProviderConnectionError`. Needs the ``websockets`` package (extra ``websocket``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from .._exceptions import ConfigurationError, PreviousResponseNotFoundError, ProviderConnectionError, StreamError
from .._json import dumps, parse_json
from ..turns import BLOCK_META_RESPONSE_ID, Block, Turn, block_meta_key
from ._http_errors import error_from_response, responses_create_error_info
from ._retry import RetryPolicy, should_retry
from ._sse import DEFAULT_MAX_EVENT_SIZE, SSEEvent

__all__ = ["BLOCK_META_CONNECTION", "CONNECTION_STATE_LOST", "ResponsesSocket", "check_transport", "make_socket"]

BLOCK_META_CONNECTION = block_meta_key("openai", "connection", 1, str)
"""``openai.connection@v1``: the WebSocket connection a response was made on (its blocks carry it)."""

CONNECTION_STATE_LOST = "connection_state_lost"
"""The fallback reason of a whole-Turn request after the connection holding the anchor (``store: false``) ended."""

TRANSPORT_ONLY = ("stream", "stream_options", "background")
"""Body fields that do not go into ``response.create``: the socket always streams; background is HTTP's."""

LIMIT_REACHED = "websocket_connection_limit_reached"
_TERMINAL = ("response.completed", "response.incomplete", "response.failed", "error")
_numbers = itertools.count(1)
_PROCESS = secrets.token_hex(4)  # connection ids stay unique across processes (a Turn outlives its process)


def _websockets() -> Any:
    try:
        from websockets.asyncio import client
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            'transport="websocket" needs the websockets package: pip install "geppetto[websocket]"'
        ) from exc
    return client


def socket_url(base_url: str) -> str:
    """``wss://host/v1/responses`` for the base URL ``https://host/v1``."""
    if base_url.startswith("https://"):
        return "wss://" + base_url[8:].rstrip("/") + "/responses"
    if base_url.startswith("http://"):
        return "ws://" + base_url[7:].rstrip("/") + "/responses"
    return base_url.rstrip("/") + "/responses"


class ResponsesSocket:
    """One engine's WebSocket connection to ``/v1/responses``. ``idle_timeout``: seconds without a request
    after which the client closes the connection (None: keep it); ``max_age``: seconds after which a new
    one replaces it (the service's limit is 3600); ``read_timeout``: seconds to wait for each event; ``retry``:
    how an error event of a retryable status (429, 5xx) is retried."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        idle_timeout: float | None = None,
        max_age: float = 3300.0,
        open_timeout: float = 30.0,
        read_timeout: float | None = 600.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self.idle_timeout, self.max_age = idle_timeout, max_age
        self.open_timeout, self.read_timeout = open_timeout, read_timeout
        self.retry = retry if retry is not None else RetryPolicy()
        self._ws: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._opened = self._used = 0.0
        self.connection_id = ""
        """The id of the current (or last) connection, ``ws-<process>-<n>``; empty before the first."""
        self.connections = 0
        """How many connections were opened."""
        self.bytes_sent = self.bytes_received = 0
        self.last_connection = ""
        """The connection the latest answer came on."""
        self._made: dict[str, str] = {}

    # -- state ------------------------------------------------------------------------------------------------
    def live(self) -> str | None:
        """The id of the connection a request sent now would use, or None when it would open a new one."""
        ws = self._ws
        if ws is None or self._loop is not _running_loop():
            return None
        if getattr(ws.state, "name", "") != "OPEN":
            return None
        now = time.monotonic()
        if self.idle_timeout is not None and now - self._used > self.idle_timeout:
            return None
        if now - self._opened > self.max_age:
            return None
        return self.connection_id

    def lost(self, turn: Turn, anchor: str | None) -> str | None:
        """Why ``anchor`` (a response of ``turn`` made with ``store: false``) cannot be chained on now: the
        connection that holds it ended (None: it is the live connection's, or not known to be a socket's)."""
        if not anchor:
            return None
        made = None
        key = str(BLOCK_META_RESPONSE_ID)
        for block in reversed(turn.blocks):
            if block.metadata.get(key) == anchor:
                made = BLOCK_META_CONNECTION.get(block.metadata)
                break
        if made is None:
            return f"response {anchor} was not made on a WebSocket connection; its store:false state is not on one"
        live = self.live()
        if made == live:
            return None
        now = f"connection {live} is open" if live else "a new connection opens"
        return f"response {anchor} lived only on connection {made}, which has ended ({now})"

    def stamp(self, blocks: Sequence[Block]) -> None:
        """Record on a response's blocks the connection it came on (part of the anchor's proof): the one its
        first event arrived on, else the latest answer's."""
        key = str(BLOCK_META_RESPONSE_ID)
        for block in blocks:
            made = self._made.get(str(block.metadata.get(key) or "")) or self.last_connection
            if made:
                BLOCK_META_CONNECTION.set(block.metadata, made)

    def _remember(self, raw: str) -> None:
        """Note the connection of the response a first event names (the latest 256 responses)."""
        try:
            data = parse_json(raw)
        except ValueError:
            return
        response = data.get("response") if isinstance(data, dict) else None
        if isinstance(response, dict) and response.get("id"):
            self._made[str(response["id"])] = self.connection_id
            while len(self._made) > 256:
                del self._made[next(iter(self._made))]

    # -- connection ---------------------------------------------------------------------------------------------
    async def _open(self) -> Any:
        if self.live() is not None:
            return self._ws
        await self._drop()
        client = _websockets()
        try:
            ws = await client.connect(
                self.url,
                additional_headers=self.headers,
                open_timeout=self.open_timeout,
                max_size=DEFAULT_MAX_EVENT_SIZE,  # one event at most as large as over SSE
                compression=None,
            )
        except (OSError, TimeoutError) as exc:
            raise ProviderConnectionError(
                f"could not open the WebSocket connection to {self.url}: {exc}; check the base URL, or use "
                'transport="http"',
                provider="openai",
            ) from exc
        except Exception as exc:  # the handshake refused (websockets.InvalidStatus, InvalidHandshake...)
            raise ProviderConnectionError(
                f"the server refused the WebSocket connection to {self.url}: {exc}; check the API key and that the "
                'server has a WebSocket mode, or use transport="http"',
                provider="openai",
            ) from exc
        self._ws, self._loop = ws, _running_loop()
        self._opened = self._used = time.monotonic()
        self.connections += 1
        self.connection_id = f"ws-{_PROCESS}-{next(_numbers)}"
        return ws

    async def _drop(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None and self._loop is _running_loop():
            with contextlib.suppress(Exception):
                await ws.close()

    async def aclose(self) -> None:
        """Close the connection (the next request opens a new one)."""
        await self._drop()

    def _guard(self) -> asyncio.Lock:
        loop = _running_loop()
        if self._lock is None or self._lock_loop is not loop:  # a lock belongs to its event loop
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    # -- one request --------------------------------------------------------------------------------------------
    def message(self, body: Mapping[str, Any]) -> str:
        """The ``response.create`` message for an HTTP request body."""
        fields = {k: v for k, v in body.items() if k not in TRANSPORT_ONLY}
        return dumps({"type": "response.create", **fields})

    async def stream(self, body: Mapping[str, Any]) -> AsyncGenerator[SSEEvent, None]:
        """Send ``body`` as ``response.create``; yield the answer's events, up to the terminal one. An error
        the server sends instead of a response is retried as the HTTP path retries its status (429, 5xx:
        ``retry``'s backoff, the same connection), else raised as that status's error."""
        async with self._guard():
            text = self.message(body)
            ws = await self._send(text)
            attempt = 0
            started = finished = False
            try:
                while True:
                    raw = await self._recv(ws, started)
                    self.bytes_received += len(raw)
                    event = _event(raw)
                    if event.event == "error" and not started:
                        status = _status(raw)
                        if _code(raw) == LIMIT_REACHED and not _bound(body) and attempt < self.retry.max_retries:
                            await self._drop()  # too old: the same request on a new connection
                            attempt += 1
                            ws = await self._send(text)
                            continue
                        if should_retry(status, {}) and attempt < self.retry.max_retries:
                            await asyncio.sleep(self.retry.backoff(attempt))
                            attempt += 1
                            ws = await self._send(text)
                            continue
                        finished = True
                        self._used = time.monotonic()
                        raise _refused(raw, body, self)
                    if not started:
                        self._remember(raw)
                    started = True
                    finished = event.event in _TERMINAL
                    yield event
                    if finished:
                        self._used = time.monotonic()
                        return
            finally:
                if not finished:  # the rest of this answer would be read as the next one's: a new connection
                    await self._drop()

    async def _send(self, text: str) -> Any:
        ws = await self._open()
        try:
            await ws.send(text)
        except Exception:  # closed under us before it was sent: a new connection, once
            await self._drop()
            ws = await self._open()
            await ws.send(text)
        self.bytes_sent += len(text.encode())
        self._used = time.monotonic()
        self.last_connection = self.connection_id
        return ws

    async def _recv(self, ws: Any, started: bool) -> str:
        try:
            raw = await asyncio.wait_for(ws.recv(), self.read_timeout)
        except TimeoutError as exc:
            await self._drop()
            raise StreamError(
                f"no event on the WebSocket connection for {self.read_timeout} s; the connection was closed",
                received="",
                provider="openai",
            ) from exc
        except Exception as exc:  # websockets.ConnectionClosed
            self._ws = None
            close = getattr(exc, "rcvd", None)
            how = f" (close code {close.code}: {close.reason or 'no reason'})" if close is not None else ""
            if not started:
                raise ProviderConnectionError(
                    f"the server closed the WebSocket connection before answering{how}", provider="openai"
                ) from exc
            raise StreamError(
                f"the server closed the WebSocket connection while the answer streamed{how}",
                received="",
                provider="openai",
            ) from exc
        return raw if isinstance(raw, str) else raw.decode(errors="replace")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _event(raw: str) -> SSEEvent:
    """One message as the SSE event it is (its ``type`` as the event name)."""
    try:
        data = parse_json(raw)
    except ValueError:
        return SSEEvent("", raw)
    kind = str(data.get("type") or "") if isinstance(data, dict) else ""
    return SSEEvent(kind, raw)


def _status(raw: str) -> int:
    """The HTTP status an error message stands for (400 when it names none)."""
    try:
        data = parse_json(raw)
    except ValueError:
        return 400
    status = data.get("status") if isinstance(data, dict) else None
    return status if isinstance(status, int) else 400


def _code(raw: str) -> str | None:
    try:
        data = parse_json(raw)
    except ValueError:
        return None
    error = data.get("error") if isinstance(data, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return str(code) if code else None


def _bound(body: Mapping[str, Any]) -> bool:
    """Whether the request chains on state only its connection holds (``store: false``)."""
    return bool(body.get("previous_response_id")) and body.get("store") is False


def _refused(raw: str, body: Mapping[str, Any], socket: ResponsesSocket) -> Exception:
    """The error event sent instead of a response, as the error the HTTP path raises for that answer. A
    connection at its age limit is closed: the next request opens a new one."""
    data = parse_json(raw)
    error = data.get("error") if isinstance(data, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    if code == LIMIT_REACHED:
        socket._ws = None
        if _bound(body):
            return PreviousResponseNotFoundError(
                f"the WebSocket connection reached its age limit, and response {body['previous_response_id']} "
                "lived on it only",
                provider="openai",
                code="previous_response_not_found",
                body=data,
            )
        return ProviderConnectionError(
            "the WebSocket connection reached its age limit (websocket_connection_limit_reached); the next "
            "request opens a new one",
            provider="openai",
        )
    return error_from_response(
        _status(raw),
        raw,
        {},
        provider="openai",
        parser=responses_create_error_info,
    )


def check_transport(transport: Any, *, background: bool) -> None:
    """Raise ConfigurationError for a ``transport=`` setting the engine cannot use."""
    if transport not in (None, "http", "websocket") and not isinstance(transport, ResponsesSocket):
        raise ConfigurationError(
            f"transport={transport!r}: use 'http' (the default), 'websocket', or a ResponsesSocket(url, ...)"
        )
    if background and transport not in (None, "http"):
        raise ConfigurationError(
            'background=True is not supported over WebSocket (the service refuses it there); use transport="http" '
            "for background responses"
        )


def make_socket(transport: Any, base_url: str, headers: Mapping[str, str]) -> ResponsesSocket | None:
    """The engine's socket for its ``transport=`` setting: ``"http"`` none, ``"websocket"`` a new one, a
    :class:`ResponsesSocket` itself (its own timeouts) used as given."""
    if transport in (None, "http"):
        return None
    if transport == "websocket":
        return ResponsesSocket(socket_url(base_url), headers)
    if isinstance(transport, ResponsesSocket):
        if not transport.headers:
            transport.headers = dict(headers)
        return transport
    raise ConfigurationError(
        f"transport={transport!r}: use 'http' (the default), 'websocket', or a ResponsesSocket(url, ...)"
    )
