"""The shared HTTP transport: SSE parsing, retries, backoff hints and error mapping (httpx.MockTransport)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

import geppetto as gp
from geppetto.providers._http import HttpTransport
from geppetto.providers._http_errors import (
    ErrorInfo,
    anthropic_error_info,
    error_from_response,
    gemini_error_info,
    openai_error_info,
)
from geppetto.providers._retry import RetryPolicy, retry_delay_from_headers, should_retry
from geppetto.providers._sse import SSEEvent, iter_sse


async def _lines(*lines: str) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def _collect(lines: AsyncIterator[str]) -> list[SSEEvent]:
    return [e async for e in iter_sse(lines)]


async def test_sse_fields_multiline_comments_and_eof_flush() -> None:
    events = await _collect(
        _lines(
            ": a comment",
            "event: response.created",
            'data: {"a":',
            "data: 1}",
            "id: 7",
            "",
            "",
            "data: no-event-name",
            "",
            "event: only-name-no-data",
            "",
            "event: last",
            "data:tail",
        )
    )
    assert events == [
        SSEEvent("response.created", '{"a":\n1}', "7"),
        SSEEvent("", "no-event-name", None),
        SSEEvent("last", "tail", None),
    ]
    assert events[0].json() == {"a": 1}


def _transport(
    handler: Callable[[httpx.Request], Any], sleeps: list[float] | None = None, **options: Any
) -> HttpTransport:
    """A transport over ``handler`` that records its backoff delays in ``sleeps``; ``options`` go to
    ``HttpTransport`` and win over these defaults."""

    async def sleep(delay: float) -> None:
        if sleeps is not None:
            sleeps.append(delay)

    defaults: dict[str, Any] = {
        "headers": {"authorization": "Bearer k"},
        "retry": RetryPolicy(max_retries=2, initial_delay=1.0, jitter=0.0),
        "sleep": sleep,
    }
    return HttpTransport(
        "http://test/v1/", provider="openai", transport=httpx.MockTransport(handler), **{**defaults, **options}
    )


def _openai_error(status: int, message: str, code: str | None = None, **headers: str) -> httpx.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": "input", "code": code}}
    return httpx.Response(status, json=body, headers={"x-request-id": "req_1", **headers})


async def test_retries_429_honouring_retry_after_ms_then_succeeds() -> None:
    calls: list[httpx.Request] = []
    sleeps: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            return _openai_error(429, "slow down", "rate_limit_exceeded", **{"retry-after-ms": "250"})
        if len(calls) == 2:
            return _openai_error(503, "busy", **{"retry-after": "2"})
        return httpx.Response(200, json={"ok": True})

    async with _transport(handler, sleeps) as http:
        assert await http.post_json("/responses", {"x": 1}) == {"ok": True}
    assert sleeps == [0.25, 2.0]
    assert [str(c.url) for c in calls] == ["http://test/v1/responses"] * 3
    assert json.loads(calls[0].content) == {"x": 1}
    assert calls[0].headers["authorization"] == "Bearer k"


async def test_no_retry_on_400_and_error_carries_provider_fields() -> None:
    sleeps: list[float] = []
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return _openai_error(400, "Previous response with id 'resp_x' not found.", "previous_response_not_found")

    async with _transport(handler, sleeps) as http:
        with pytest.raises(gp.PreviousResponseNotFoundError) as info:
            await http.post_json("responses", {})
    err = info.value
    assert (calls, sleeps) == (1, [])
    assert (err.status, err.provider, err.code, err.error_type, err.param, err.request_id, err.message) == (
        400,
        "openai",
        "previous_response_not_found",
        "invalid_request_error",
        "input",
        "req_1",
        "Previous response with id 'resp_x' not found.",
    )
    assert isinstance(err, gp.BadRequestError)


async def test_retries_exhausted_raise_mapped_error_with_exponential_backoff() -> None:
    sleeps: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        return _openai_error(500, "boom")

    async with _transport(handler, sleeps) as http:
        with pytest.raises(gp.ServerError, match="boom"):
            await http.get_json("models")
    assert sleeps == [1.0, 2.0]


async def test_x_should_retry_overrides_status() -> None:
    sleeps: list[float] = []
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return _openai_error(429, "quota", "insufficient_quota", **{"x-should-retry": "false"})

    async with _transport(handler, sleeps) as http:
        with pytest.raises(gp.RateLimitError):
            await http.post_json("responses", {})
    assert (calls, sleeps) == (1, [])


async def test_connection_errors_are_retried_then_raised() -> None:
    sleeps: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with _transport(handler, sleeps) as http:
        with pytest.raises(gp.ProviderConnectionError, match="check the base URL"):
            await http.post_json("responses", {})
    assert len(sleeps) == 2


async def test_stream_sse_yields_events_and_maps_pre_stream_errors() -> None:
    sleeps: list[float] = []
    seen = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal seen
        seen += 1
        if seen == 1:
            return _openai_error(529, "overloaded")
        body = 'event: a\ndata: {"type":"a"}\n\ndata: {"type":"b"}\n\n'
        return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})

    async with _transport(handler, sleeps) as http:
        events = [e async for e in http.stream_sse("responses", {"stream": True})]
    assert events == [SSEEvent("a", '{"type":"a"}'), SSEEvent("", '{"type":"b"}')]
    assert sleeps == [1.0]


def test_should_retry_table() -> None:
    assert [should_retry(s, {}) for s in (400, 401, 403, 404, 408, 409, 422, 429, 500, 503, 529)] == [
        False,
        False,
        False,
        False,
        True,
        True,
        False,
        True,
        True,
        True,
        True,
    ]
    assert should_retry(400, {"x-should-retry": "true"}) is True


def test_retry_after_http_date() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=3), usegmt=True)
    assert retry_delay_from_headers({"retry-after": later}, now=now.timestamp()) == 3.0
    assert retry_delay_from_headers({"retry-after": "garbage"}) is None
    assert retry_delay_from_headers({}) is None


def test_error_body_hooks_per_provider() -> None:
    assert anthropic_error_info({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}) == (
        ErrorInfo("Overloaded", "overloaded_error", "overloaded_error")
    )
    assert gemini_error_info([{"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}}]) == ErrorInfo(
        "bad", "INVALID_ARGUMENT", "INVALID_ARGUMENT"
    )
    assert openai_error_info({"nope": 1}) is None
    err = error_from_response(502, "<html>bad gateway</html>", {}, provider="x", parser=openai_error_info)
    assert (type(err), err.message, err.status) == (gp.ServerError, "<html>bad gateway</html>", 502)
    auth = error_from_response(401, "", {"request-id": "r9"}, provider="anthropic", parser=anthropic_error_info)
    assert (type(auth), auth.message, auth.request_id) == (gp.AuthenticationError, "HTTP 401 with an empty body", "r9")


class _Held:
    """A MockTransport handler that counts requests in progress and holds each until released."""

    def __init__(self) -> None:
        self.active = 0
        self.most = 0
        self.arrived = 0
        self.release = asyncio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.active += 1
        self.arrived += 1
        self.most = max(self.most, self.active)
        try:
            await self.release.wait()
        finally:
            self.active -= 1
        return httpx.Response(200, json={"ok": True})


async def test_max_in_flight_bounds_requests_and_lets_the_rest_through_in_turn() -> None:
    held = _Held()
    http = _transport(held, max_in_flight=2)
    calls = [asyncio.create_task(http.post_json("responses", {"n": i})) for i in range(5)]
    for _ in range(20):
        await asyncio.sleep(0)
    assert held.arrived == 2  # the other three wait before the pool
    held.release.set()
    assert await asyncio.gather(*calls) == [{"ok": True}] * 5
    assert held.most == 2
    await http.aclose()


async def test_an_open_stream_keeps_its_place_until_it_is_closed() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path.endswith("stream"):
            body = b'data: {"type":"a"}\n\ndata: {"type":"b"}\n\n'
            return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json={})

    http = _transport(handler, max_in_flight=1)
    events = http.stream_sse("stream", {})
    assert (await anext(events)).data == '{"type":"a"}'
    other = asyncio.create_task(http.post_json("other", {}))
    for _ in range(20):
        await asyncio.sleep(0)
    assert seen == ["/v1/stream"]  # the stream is still open: the second request waits
    await events.aclose()  # type: ignore[attr-defined]
    assert await asyncio.wait_for(other, 5) == {}
    assert seen == ["/v1/stream", "/v1/other"]
    await http.aclose()


async def test_a_request_waiting_to_retry_gives_up_its_place() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path.endswith("busy") and seen.count("/v1/busy") == 1:
            return _openai_error(429, "slow down")
        return httpx.Response(200, json={"path": request.url.path})

    async def sleep(delay: float) -> None:
        # another request gets through while the first one waits: it would hang here if the place were held
        assert await asyncio.wait_for(http.post_json("other", {}), 5) == {"path": "/v1/other"}

    http = _transport(handler, max_in_flight=1, sleep=sleep)
    assert await http.post_json("busy", {}) == {"path": "/v1/busy"}
    assert seen == ["/v1/busy", "/v1/other", "/v1/busy"]
    await http.aclose()


def test_max_in_flight_must_be_positive_or_none() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        HttpTransport("http://test", provider="openai", max_in_flight=0)
    assert HttpTransport("http://test", provider="openai", max_in_flight=None).max_in_flight is None


class _BreaksOff(httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'data: {"type":"a"}\n\n'
        raise httpx.ReadError("connection reset")


async def test_a_stream_that_breaks_off_and_a_non_json_answer_name_the_response() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("stream"):
            return httpx.Response(200, stream=_BreaksOff(), headers={"x-request-id": "req_s"})
        return httpx.Response(200, content=b"<html>", headers={"x-request-id": "req_j"})

    async with _transport(handler) as http:
        events = []
        with pytest.raises(gp.StreamError, match=r"broke off after .* s: connection reset") as broke:
            async for event in http.stream_sse("stream", {}):
                events.append(event)
        assert events == [SSEEvent("", '{"type":"a"}')]
        assert (broke.value.status, broke.value.request_id, broke.value.provider) == (200, "req_s", "openai")
        with pytest.raises(gp.ProviderError, match="expected a JSON answer from GET json") as bad:
            await http.get_json("json")
        assert (bad.value.status, bad.value.request_id) == (200, "req_j")


class _TimesOut(httpx.AsyncByteStream):
    """One event, then the read timeout httpx raises when no more data came in time."""

    def __init__(self, request: httpx.Request) -> None:
        self.request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'data: {"type":"a"}\n\n'
        raise httpx.ReadTimeout("", request=self.request)


async def test_a_read_timeout_mid_stream_says_how_long_no_data_came_and_which_option_waits_longer() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_TimesOut(request))

    async with _transport(handler, timeout=httpx.Timeout(10.0, read=2.5)) as http:
        with pytest.raises(gp.StreamError) as broke:
            async for _ in http.stream_sse("responses", {}):
                pass
    message = str(broke.value)
    assert message.startswith("[openai] the stream from http://test/v1/responses broke off after ")
    assert message.endswith(
        "s: no data for 2.5 s (read timeout); to wait longer pass the engine timeout=<seconds> "
        "(or httpx.Timeout(..., read=...))"
    )
    assert "\n" not in message


async def test_an_error_answer_nested_too_deep_keeps_its_text_instead_of_raising_recursion_error() -> None:
    deep = '{"error": ' + "[" * 10_000 + "]" * 10_000 + "}"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, content=deep.encode(), headers={"x-request-id": "req_d"})

    async with _transport(handler) as http:
        with pytest.raises(gp.ProviderError) as refused:
            await http.post_json("responses", {})
    assert (refused.value.status, refused.value.request_id, refused.value.body) == (400, "req_d", deep)
    assert '{"error": [[[' in str(refused.value)


async def test_a_json_answer_nested_too_deep_is_a_provider_error_naming_the_depth_and_the_limit() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b'{"x": ' + b"[" * 10_000 + b"]" * 10_000 + b"}")

    async with _transport(handler) as http:
        with pytest.raises(gp.ProviderError) as refused:
            await http.get_json("responses/resp_1")
    assert "the JSON answer from GET responses/resp_1 was refused: JSON nested 10001 levels deep; the limit is 200" in (
        str(refused.value)
    )
