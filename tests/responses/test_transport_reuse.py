"""One transport per ResponsesEngine: one client for every request, the key sent per request (also on a
given transport), and ``aclose`` closing only a client the engine made."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from responses_support import engine

from geppetto import Block, ConfigurationError, Turn
from geppetto.providers._http import HttpTransport
from geppetto.providers._retry import RetryPolicy
from geppetto.providers.openai_responses import ConversationState, ResponsesEngine, set_state
from geppetto.simulator import Reply, Simulator


def _turn(text: str = "hi") -> Turn:
    turn = Turn()
    turn.append(Block.user(text))
    return turn


def _sse_reply(request: httpx.Request, n: int) -> httpx.Response:
    body = json.loads(request.content)
    response = {
        "id": f"resp_{n}",
        "object": "response",
        "status": "completed",
        "previous_response_id": body.get("previous_response_id"),
        "conversation": {"id": body["conversation"]} if body.get("conversation") else None,
        "output": [
            {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": f"answer {n}", "annotations": []}],
            }
        ],
    }
    events = [{"type": "response.created", "response": {**response, "output": []}}]
    events.append({"type": "response.completed", "response": response})
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})


def _recording(seen: list[httpx.Request]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith("/conversations"):
            return httpx.Response(200, json={"id": "conv_1", "object": "conversation", "created_at": 0})
        return _sse_reply(request, len(seen))

    return httpx.MockTransport(handler)


async def test_one_client_serves_every_request_until_the_engine_is_closed(
    geppetto_sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[httpx.AsyncClient] = []

    class Counting(httpx.AsyncClient):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(httpx, "AsyncClient", Counting)
    geppetto_sim.queue(*(Reply(text=f"r{i}") for i in range(4)))
    async with engine(geppetto_sim) as eng:
        transport = eng._transport
        turn = _turn()
        for i in range(4):
            await eng.run_inference(turn)
            turn.append(Block.user(f"more {i}"))
            assert eng._transport is transport
    assert len(made) == 1 and made[0].is_closed
    assert [r.body.get("previous_response_id") is not None for r in geppetto_sim.requests] == [
        False,
        True,
        True,
        True,
    ]


async def test_engines_on_a_given_transport_each_send_their_own_key() -> None:
    seen: list[httpx.Request] = []
    shared = HttpTransport(
        "http://test/v1", provider="openai", transport=_recording(seen), retry=RetryPolicy(max_retries=0)
    )
    first = ResponsesEngine("gpt-4.1", api_key="key-A", http=shared)
    second = ResponsesEngine("gpt-4.1", api_key="key-B", http=shared, mode="conversation")
    await first.run_inference(_turn())
    await second.run_inference(_turn())  # creates a conversation, then sends the request
    await first.run_inference(_turn())
    assert [(r.url.path, r.headers.get("authorization")) for r in seen] == [
        ("/v1/responses", "Bearer key-A"),
        ("/v1/conversations", "Bearer key-B"),
        ("/v1/responses", "Bearer key-B"),
        ("/v1/responses", "Bearer key-A"),
    ]
    assert shared.headers == {}  # nothing of an engine's sticks to the shared transport
    await shared.aclose()


async def test_a_transport_without_a_key_lets_its_own_headers_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without api_key or OPENAI_API_KEY a given transport is trusted to carry the credentials itself."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    seen: list[httpx.Request] = []
    shared = HttpTransport(
        "http://test/v1", provider="openai", headers={"authorization": "Bearer proxy"}, transport=_recording(seen)
    )
    await ResponsesEngine("gpt-4.1", http=shared).run_inference(_turn())
    assert seen[0].headers["authorization"] == "Bearer proxy"
    await shared.aclose()
    async with httpx.AsyncClient() as client:  # a bare client carries no key: the engine needs one
        with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
            ResponsesEngine("gpt-4.1", http=client)


async def test_an_env_key_is_sent_on_a_given_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    seen: list[httpx.Request] = []
    shared = HttpTransport("http://test/v1", provider="openai", transport=_recording(seen))
    turn = _turn()
    set_state(turn, ConversationState(mode="stateless"))
    await ResponsesEngine("gpt-4.1", http=shared).run_inference(turn)
    assert seen[0].headers["authorization"] == "Bearer sk-env"
    await shared.aclose()


async def test_aclose_closes_only_a_client_the_engine_made(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(*(Reply(text=f"r{i}") for i in range(3)))
    client = httpx.AsyncClient()
    shared = HttpTransport(geppetto_sim.openai_url, provider="openai")
    own = engine(geppetto_sim)
    for http in (client, shared, None):
        eng = own if http is None else engine(geppetto_sim, http=http)
        async with eng:
            await eng.run_inference(_turn())
    assert not client.is_closed
    assert shared._client is not None and not shared._client.is_closed
    assert own._transport._client is None  # closed and let go
    await own.aclose()  # closing twice is harmless
    await client.aclose()
    await shared.aclose()
