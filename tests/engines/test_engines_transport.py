"""One transport per engine, shareable between engines: per-request keys and error parsers, one client."""

from __future__ import annotations

import httpx
import pytest
from engines_support import stream_text

from geppetto import Block, NotFoundError, Turn, run_sync
from geppetto.providers._http import HttpTransport
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine
from geppetto.providers.openai_chat import ChatEngine
from geppetto.simulator import Reply, Simulator


def user_turn(text: str = "hi") -> Turn:
    turn = Turn()
    turn.append(Block.user(text))
    return turn


def replaying(fixture: str, seen: list[httpx.Request], *, status: int = 200, body: str = "") -> httpx.MockTransport:
    text = body or stream_text(fixture)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, text=text)

    return httpx.MockTransport(handler)


async def test_engines_sharing_a_transport_each_send_their_own_key() -> None:
    seen: list[httpx.Request] = []
    shared = HttpTransport(
        "https://api.anthropic.com", provider="anthropic", transport=replaying("anthropic_basic_response.sse", seen)
    )
    first = ClaudeEngine("claude-sonnet-4", api_key="key-A", http=shared)
    second = ClaudeEngine("claude-sonnet-4", api_key="key-B", http=shared)
    for engine in (first, second, first):
        await engine.run_inference(user_turn())
    assert [r.headers["x-api-key"] for r in seen] == ["key-A", "key-B", "key-A"]
    assert shared.headers == {}  # nothing of an engine's sticks to the shared transport
    await shared.aclose()


async def test_errors_on_a_shared_transport_are_read_by_the_engines_own_parser() -> None:
    seen: list[httpx.Request] = []
    body = '{"error": {"code": 404, "message": "models/gemini-9 is not found.", "status": "NOT_FOUND"}}'
    shared = HttpTransport(
        "https://generativelanguage.googleapis.com",
        provider="gemini",
        transport=replaying("", seen, status=404, body=body),
    )
    with pytest.raises(NotFoundError) as info:
        await GeminiEngine("gemini-9", api_key="k", http=shared).run_inference(user_turn())
    assert (info.value.error_type, info.value.code) == ("NOT_FOUND", "NOT_FOUND")
    assert info.value.message.startswith("models/gemini-9 is not found. (check the model name 'gemini-9'")
    await shared.aclose()


async def test_an_engine_keeps_one_client_until_it_is_closed(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="one"), Reply(text="two"))
    async with ChatEngine("sim-1", "sk-test", geppetto_sim.openai_url) as engine:
        await engine.run_inference(user_turn())
        client = engine._transport._client
        await engine.run_inference(user_turn())
        assert engine._transport._client is client is not None
    assert client.is_closed


def test_run_sync_twice_gets_a_client_per_loop_and_closes_each_with_its_loop(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="first"), Reply(text="second"))
    engine = GeminiEngine("sim-1", "g-test", geppetto_sim.url)
    assert run_sync(engine, user_turn()).blocks[-1].text == "first"
    first = engine._transport._client
    assert run_sync(engine, user_turn()).blocks[-1].text == "second"
    second = engine._transport._client
    assert first is not second and first is not None and second is not None
    assert first.is_closed and second.is_closed  # each loop closed its client as it shut down


async def test_a_given_client_or_transport_is_never_closed_by_the_engine() -> None:
    seen: list[httpx.Request] = []
    client = httpx.AsyncClient(transport=replaying("anthropic_basic_response.sse", seen))
    shared = HttpTransport(
        "https://api.anthropic.com", provider="anthropic", transport=replaying("anthropic_basic_response.sse", seen)
    )
    async with ClaudeEngine("m", api_key="k", http=client) as engine:
        await engine.run_inference(user_turn())
    async with ClaudeEngine("m", api_key="k", http=shared) as engine:
        await engine.run_inference(user_turn())
    assert not client.is_closed and shared._client is not None and not shared._client.is_closed
    await client.aclose()
    await shared.aclose()
