"""The one HTTP transport every engine uses: JSON requests, SSE streams, retries and error mapping.

``HttpTransport`` wraps an ``httpx.AsyncClient``. Requests that fail with 408, 409, 429, 5xx or 529
(or a connection error) are retried with exponential backoff and jitter, honouring the server's
``retry-after-ms``, ``retry-after`` (seconds or an HTTP date) and ``x-should-retry`` headers; any other
4xx is raised at once. A request that changes something (a POST) and broke after it went out may have
reached the server: before it is sent again its caller's ``landed`` check is asked, and without one the
retry is logged and counted as of unknown outcome (``_landed``). Errors become geppetto exceptions carrying the provider's message, code, type,
param and request id; the shape of each provider's error body is read by a small ``ErrorParser`` hook
(``openai_error_info``, ``anthropic_error_info``, ``gemini_error_info``).

A transport makes its ``httpx.AsyncClient`` lazily, on first use, and keeps it for every later request on
the same event loop (a client per request costs most of the client-side CPU of a request). A client is
bound to the loop it was made on, so a request from another loop (``run_sync`` twice) gets a fresh one;
the old one is closed when its loop shuts down (``asyncio.run`` closes open async generators first).

The retry policy (``_retry``), SSE decoding (``_sse``), error bodies (``_http_errors``) and the words for a
failed request (``_http_failures``) live beside it; import their names from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from typing import Any

import httpx

from geppetto._exceptions import ProviderConnectionError, ProviderError, StreamError
from geppetto._json import JSONTooDeep, dumps, parse_json
from geppetto._redact import remember_secrets

from ._http_errors import (
    ErrorParser,
    error_from_response,
    openai_error_info,
    request_id,
)
from ._http_failures import broken_off, error_body, not_a_stream, unanswered
from ._landed import LandedCheck, may_have_landed, retried_unknown
from ._retry import RetryPolicy, retry_delay_from_headers, should_retry
from ._sse import DEFAULT_MAX_EVENT_SIZE, EventTooLarge, SSEDecoder, SSEEvent

__all__ = ["HttpTransport"]

log = logging.getLogger("geppetto.providers")

REQUEST_HOOKS: list[Callable[[str, dict[str, str], int], None]] = []
"""Called before each provider request is sent, with its URL, its headers (which a hook may add to, e.g. a
W3C ``traceparent``) and its body size in bytes. Empty unless instrumentation is installed."""


DEFAULT_MAX_IN_FLIGHT = 100
"""Requests a transport lets through at once unless told otherwise: httpx's default pool size."""


class HttpTransport:
    """An ``httpx.AsyncClient`` with retries, SSE and provider error mapping, bound to one base URL.

    ``headers`` go on every request (auth, versions). Pass ``transport=httpx.MockTransport(...)`` in tests,
    or a ready ``client`` to share connections. ``sleep`` is injectable so tests need not wait.

    ``max_in_flight`` bounds the requests open at once through this transport (a stream counts until it
    is closed; a request waiting to be retried does not): more wait their turn, in order, before they
    reach httpx's pool. httpx would queue them too, but its pool scans every waiting request against
    every connection on each request and response event, which costs CPU quadratic in the queue (400
    waiting sessions: 99 s). Engines that share this transport share the bound. A client the
    transport makes itself gets a pool of that many connections (httpx's default is 100). ``None``
    lifts the bound.

    ``max_event_size`` bounds one server-sent event (characters of its text, default 64 Mi): a longer one
    ends the stream with a :class:`~geppetto.StreamError` naming the bound instead of filling memory.
    """

    def __init__(
        self,
        base_url: str,
        *,
        provider: str,
        headers: Mapping[str, str] | None = None,
        error_parser: ErrorParser = openai_error_info,
        retry: RetryPolicy | None = None,
        timeout: float | httpx.Timeout = 600.0,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
        max_in_flight: int | None = DEFAULT_MAX_IN_FLIGHT,
        max_event_size: int = DEFAULT_MAX_EVENT_SIZE,
    ) -> None:
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1 (or None for no bound), not {max_in_flight}")
        self.max_in_flight = max_in_flight
        self.max_event_size = max_event_size
        self.base_url = base_url.rstrip("/")
        self.provider = provider
        self.headers = dict(headers or {})
        self.error_parser = error_parser
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._given = client
        self._timeout, self._mock = timeout, transport
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closer: AsyncGenerator[None, None] | None = None
        self._gate: asyncio.Semaphore | None = None
        self._gate_loop: asyncio.AbstractEventLoop | None = None

    def url(self, path: str) -> str:
        """``base_url`` joined with ``path`` (an absolute URL is kept as is)."""
        if path.startswith(("http://", "https://")):
            return path
        return f"{self.base_url}/{path.lstrip('/')}"

    async def _http(self) -> httpx.AsyncClient:
        """The client for this event loop: the given one, else this transport's own (made on first use)."""
        if self._given is not None:
            return self._given
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            n = self.max_in_flight
            limits = httpx.Limits(max_connections=n, max_keepalive_connections=min(n, 20)) if n else httpx.Limits()
            self._client = httpx.AsyncClient(timeout=self._timeout, transport=self._mock, limits=limits)
            self._loop = loop
            # The loop closes open async generators when it shuts down: that closes this client on its loop.
            self._closer = _close_with_loop(self._client)
            await anext(self._closer)
        return self._client

    def _slot(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """One of ``max_in_flight`` places, taken with ``async with`` (a semaphore per event loop)."""
        if self.max_in_flight is None:
            return contextlib.nullcontext()
        loop = asyncio.get_running_loop()
        if self._gate is None or self._gate_loop is not loop:
            self._gate, self._gate_loop = asyncio.Semaphore(self.max_in_flight), loop
        return self._gate

    async def aclose(self) -> None:
        """Close the client if this transport made it (on this loop; one from a finished loop is already closed)."""
        closer, self._closer, self._client = self._closer, None, None
        if closer is not None and self._loop is asyncio.get_running_loop():
            await closer.aclose()

    async def __aenter__(self) -> HttpTransport:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def request_json(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        error_parser: ErrorParser | None = None,
        landed: LandedCheck | None = None,
    ) -> Any:
        """Send a request (JSON body when given) and return the parsed JSON answer (None when empty).

        ``headers`` override the transport's for this request (e.g. one engine's key on a shared transport);
        ``error_parser`` reads this request's error bodies instead of the transport's parser; ``landed`` is
        asked before a request that may have reached the server is sent again (see ``_landed``)."""
        async with self._exchange(
            method, path, body, params=params, headers=headers, stream=False, parser=error_parser, landed=landed
        ) as response:
            pass  # the whole body is read: the place is free again
        if not response.content:
            return None
        try:
            return parse_json(response.text)
        except JSONTooDeep as exc:
            raise self._error(
                ProviderError, f"the JSON answer from {method} {path} was refused: {exc}", response
            ) from None
        except ValueError as exc:
            message = f"expected a JSON answer from {method} {path}, got: {response.text[:200]!r}"
            raise self._error(ProviderError, message, response) from exc

    async def post_json(self, path: str, body: Any, *, headers: Mapping[str, str] | None = None) -> Any:
        """POST a JSON body and return the parsed JSON answer."""
        return await self.request_json("POST", path, body, headers=headers)

    async def get_json(self, path: str, *, params: Mapping[str, Any] | None = None) -> Any:
        """GET and return the parsed JSON answer."""
        return await self.request_json("GET", path, params=params)

    async def stream_sse(
        self,
        path: str,
        body: Any,
        *,
        method: str = "POST",
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        error_parser: ErrorParser | None = None,
        landed: LandedCheck | None = None,
    ) -> AsyncIterator[SSEEvent]:
        """Send a request and yield its SSE events as they arrive.

        Errors before the stream starts are retried and mapped like ``request_json`` (``headers`` and
        ``error_parser`` too); a connection that breaks mid-stream raises ``StreamError``. Use it with
        ``contextlib.aclosing`` to release the connection early. A consumer that stops after its
        protocol's last event leaves the body's end unread; closing then reads that rest (see
        :func:`_drain`), so the connection goes back to the pool instead of being closed.
        """
        async with self._exchange(
            method, path, body, params=params, headers=headers, stream=True, parser=error_parser, landed=landed
        ) as response:
            decoder = SSEDecoder(self.max_event_size)
            chunks = response.aiter_bytes()
            started = time.monotonic()
            events = 0
            head = b""  # the start of the body, to show when it turns out not to be an event stream
            try:
                async for chunk in chunks:
                    if len(head) < 200:
                        head += chunk[: 200 - len(head)]
                    for event in decoder.feed(chunk):
                        events += 1
                        yield event
                for event in decoder.flush():
                    events += 1
                    yield event
                if not events:
                    raise self._error(StreamError, not_a_stream(response, head), response)
            except GeneratorExit:
                await _drain(chunks)
                raise
            except EventTooLarge as exc:
                message = (
                    f"the stream from {response.request.url} was cut off: {exc}; raise the bound with "
                    "HttpTransport(max_event_size=...) passed to the engine as http="
                )
                raise self._error(StreamError, message, response) from None
            except httpx.HTTPError as exc:
                message = f"the stream from {response.request.url} broke off after {time.monotonic() - started:.1f} s: "
                raise self._error(StreamError, message + broken_off(exc), response) from exc
            finally:
                await _aclose(chunks)

    async def _may_resend(
        self, method: str, url: str, broken: httpx.TransportError, landed: LandedCheck | None
    ) -> bool:
        """True: a request that failed with ``broken`` may be sent again; raises ``ProviderConnectionError``
        when its ``landed`` check says it reached the server."""
        if not may_have_landed(method, broken):
            return True
        what, reason = f"{method} {url}", broken_off(broken)
        try:
            outcome = await landed() if landed is not None else None
        except (ProviderError, httpx.HTTPError) as exc:  # unproven either way: not sent again
            raise ProviderConnectionError(
                f"{url}: the connection broke ({reason}) after the request went out, and whether the server kept "
                f"it could not be read ({exc}), so it was not sent again",
                provider=self.provider,
            ) from broken
        if outcome is None:
            retried_unknown(self.provider, what, reason)
        elif outcome:
            log.warning("%s: %s failed (%s) after it reached the server; not sent again", self.provider, what, reason)
            raise ProviderConnectionError(
                f"{url}: the connection broke ({reason}) after the request reached the server, which kept it, so "
                "it was not sent again (sending it again would make the server act on it twice); the answer "
                "was not read",
                provider=self.provider,
            ) from broken
        else:
            log.info("%s: %s failed (%s) and provably did not land; sending it again", self.provider, what, reason)
        return True

    def _error(self, kind: type[ProviderError], message: str, response: httpx.Response) -> ProviderError:
        """A ``kind`` error about ``response``: its status and request id, this transport's provider."""
        return kind(
            message, status=response.status_code, provider=self.provider, request_id=request_id(response.headers)
        )

    @contextlib.asynccontextmanager
    async def _exchange(
        self,
        method: str,
        path: str,
        body: Any,
        *,
        params: Mapping[str, Any] | None,
        headers: Mapping[str, str] | None,
        stream: bool,
        parser: ErrorParser | None = None,
        landed: LandedCheck | None = None,
    ) -> AsyncIterator[httpx.Response]:
        """Send with retries and yield the successful response, holding a place (``max_in_flight``) until
        the block ends; the response is closed then. A failed attempt frees its place while it waits.

        A request that changes something and failed after its bytes went out (no answer read) may have
        landed: before it is sent again ``landed`` is asked (True: it is not sent again, the failure is
        raised; False: it did not land); without an answer either way the retry is logged and counted."""
        client = await self._http()
        all_headers = {**self.headers, **(headers or {})}
        content = None
        if body is not None:
            content = dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
            all_headers.setdefault("content-type", "application/json")
        if stream:
            all_headers.setdefault("accept", "text/event-stream")
        url = self.url(path)
        # Known before any answer, so an error that quotes the key (here or mid-stream) hides it.
        remember_secrets(all_headers)
        for hook in REQUEST_HOOKS:
            hook(url, all_headers, len(content) if content is not None else 0)
        attempt = 0
        while True:
            broken: httpx.TransportError | None = None
            async with self._slot():
                request = client.build_request(method, url, content=content, params=params, headers=all_headers)
                try:
                    response = await client.send(request, stream=stream)
                except httpx.TransportError as exc:
                    broken = exc
                else:
                    if response.status_code < 400:
                        try:
                            yield response
                        finally:
                            await response.aclose()
                        return
                    text = await error_body(response)
            if broken is not None:
                if attempt < self.retry.max_retries and await self._may_resend(method, url, broken, landed):
                    await self._sleep(self.retry.backoff(attempt))
                    attempt += 1
                    continue
                raise ProviderConnectionError(
                    unanswered(broken, self.url(path), attempt + 1), provider=self.provider
                ) from broken
            if attempt < self.retry.max_retries and should_retry(response.status_code, response.headers):
                hinted = retry_delay_from_headers(response.headers)
                delay = self.retry.backoff(attempt) if hinted is None else min(hinted, self.retry.max_server_delay)
                await self._sleep(delay)
                attempt += 1
                continue
            raise error_from_response(
                response.status_code, text, response.headers, provider=self.provider, parser=parser or self.error_parser
            )


DRAIN_BYTES = 65_536
DRAIN_S = 0.25


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """Read what is left of a stream whose consumer stopped early, at most ``DRAIN_BYTES`` within
    ``DRAIN_S``, so that httpx can keep the connection: closing a response before the end of its body
    closes the connection too, and every later request would then pay a new TCP (and TLS) handshake.
    After a protocol's last event (``response.completed``, ``[DONE]``, ``message_stop``) only the end of
    the chunked body is left. A stream that has more to say is cut off as before, and a cancelled
    task reads nothing."""
    task = asyncio.current_task()
    if task is None or task.cancelling():
        return
    read = 0
    try:
        async with asyncio.timeout(DRAIN_S):
            async for chunk in chunks:
                read += len(chunk)
                if read > DRAIN_BYTES:
                    return
    except (TimeoutError, httpx.HTTPError):
        return


async def _aclose(it: AsyncIterator[Any]) -> None:
    """Close an async generator now rather than leave it to the garbage collector (which makes the
    loop schedule a task to close it)."""
    close = getattr(it, "aclose", None)
    if close is not None:
        await close()


async def _close_with_loop(client: httpx.AsyncClient) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await client.aclose()
