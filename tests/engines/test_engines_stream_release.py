"""A stream closed after its last event gives its connection back to the pool (no new TCP connection per
request); one that still has much to say, stalls, or is cancelled is cut off as before."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx
import pytest

from geppetto import Block, Turn
from geppetto.providers import _http
from geppetto.providers._http import HttpTransport
from geppetto.providers.openai_chat import ChatEngine
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import Reply, Simulator


def counting_client(connects: list[str]) -> httpx.AsyncClient:
    """A client whose requests report each new TCP connection (httpcore's ``trace`` extension)."""

    async def trace(event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            connects.append(event)

    async def hook(request: httpx.Request) -> None:
        request.extensions["trace"] = trace

    return httpx.AsyncClient(event_hooks={"request": [hook]})


def user_turn() -> Turn:
    turn = Turn()
    turn.append(Block.user("hi"))
    return turn


async def test_stopping_at_the_last_event_keeps_the_connection(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(*(Reply(text=f"answer {i}") for i in range(3)))
    connects: list[str] = []
    async with counting_client(connects) as client:
        http = HttpTransport(geppetto_sim.openai_url, provider="openai", client=client)
        for _ in range(3):
            body = {"model": "sim-1", "input": "hi", "stream": True}
            async with aclosing(http.stream_sse("responses", body, headers={"authorization": "Bearer k"})) as events:
                async for event in events:
                    if json.loads(event.data)["type"] == "response.completed":
                        break  # as the Responses engine does: the end of the body is still unread
    assert len(connects) == 1


@pytest.mark.parametrize("engine_class", [ChatEngine, ResponsesEngine])
async def test_engines_use_one_connection_for_consecutive_requests(geppetto_sim: Simulator, engine_class: Any) -> None:
    geppetto_sim.queue(*(Reply(text=f"answer {i}") for i in range(3)))
    connects: list[str] = []
    async with counting_client(connects) as client:
        engine = engine_class("sim-1", "sk-test", geppetto_sim.openai_url, http=client)
        for i in range(3):
            turn = await engine.run_inference(user_turn())
            assert turn.blocks[-1].text == f"answer {i}"
    assert len(connects) == 1


def streaming(chunks: AsyncIterator[bytes]) -> HttpTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=chunks)

    return HttpTransport("http://sim.invalid/v1", provider="openai", transport=httpx.MockTransport(handler))


async def first_event(http: HttpTransport) -> str:
    async with aclosing(http.stream_sse("responses", {})) as events:
        async for event in events:
            return event.data
    raise AssertionError("no event")


async def test_the_rest_of_the_body_is_read_on_close() -> None:
    read: list[str] = []

    async def body() -> AsyncIterator[bytes]:
        for part in ("first", "last"):
            read.append(part)
            yield f"data: {part}\n\n".encode()
        read.append("end of body")

    async with streaming(body()) as http:
        assert await first_event(http) == "first"
    assert read == ["first", "last", "end of body"]


async def test_a_long_rest_is_cut_off_after_the_drain_limit() -> None:
    sent = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(1_000):
            sent += 1
            yield b"data: " + b"x" * 1_000 + b"\n\n"

    async with streaming(body()) as http:
        await first_event(http)
    assert sent < 1_000
    assert sent <= _http.DRAIN_BYTES // 1_000 + 3


async def test_a_stalled_rest_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http, "DRAIN_S", 0.01)
    reached_end = False

    async def body() -> AsyncIterator[bytes]:
        nonlocal reached_end
        yield b"data: first\n\n"
        await asyncio.sleep(3_600)
        reached_end = True
        yield b"data: never\n\n"

    async with asyncio.timeout(60), streaming(body()) as http:  # a guard against hanging, not a speed check
        assert await first_event(http) == "first"
    assert not reached_end


async def test_a_cancelled_consumer_reads_nothing_more() -> None:
    read: list[str] = []
    started = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        for part in ("first", "second", "third"):
            read.append(part)
            yield f"data: {part}\n\n".encode()

    async with streaming(body()) as http:

        async def consume() -> None:
            async with aclosing(http.stream_sse("responses", {})) as events:
                async for _ in events:
                    started.set()
                    await asyncio.sleep(3_600)

        task = asyncio.create_task(consume())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert read == ["first"]
