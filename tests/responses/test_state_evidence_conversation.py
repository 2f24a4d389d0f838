"""Conversation mode against a server that keeps the conversation but does not echo it: judged from the
answers' usage as chained requests are, every request after the first in the conversation, the model's
input the Turn each time."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from responses_support import engine, normalize, settle, wire_before_last_response

import geppetto as gp
from geppetto.engine import Handler
from geppetto.events import EventTextDelta
from geppetto.middleware import with_middleware
from geppetto.providers._stateful import ResponsesMetrics
from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.turns import BlockKind, Turn


@gp.tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def _strip(data: bytes, field: str = "conversation", only: str | None = None) -> bytes:
    """An event stream with ``field`` taken out of the responses its events carry (of ``only`` that event)."""
    lines = []
    for line in data.split(b"\n"):
        head, _, rest = line.partition(b": ")
        if head == b"data" and rest.startswith(b"{"):
            event = json.loads(rest)
            if isinstance(event.get("response"), dict) and only in (None, event.get("type")):
                event["response"].pop(field, None)
            line = b"data: " + json.dumps(event).encode()
        lines.append(line)
    return b"\n".join(lines)


class _NoConversationEcho(httpx.AsyncBaseTransport):
    """What a proxy in front of the simulator answers: the same, but no ``conversation`` in responses."""

    def __init__(self, field: str = "conversation", only: str | None = None) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.field, self.only = field, only

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        answer = await self.inner.handle_async_request(request)
        if not (request.method == "POST" and request.url.path == "/v1/responses") or answer.status_code != 200:
            return answer
        body = _strip(await answer.aread(), self.field, self.only)
        headers = [(k, v) for k, v in answer.headers.items() if k.lower() not in ("content-length", "content-encoding")]
        return httpx.Response(200, headers=headers, content=body)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with serve() as s:
        yield s


async def test_a_conversation_without_its_echo_is_kept_when_the_usage_shows_it(sim: Simulator) -> None:
    metrics = ResponsesMetrics()
    checked: list[int] = []

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            turn = await next_handler(turn)
            rid, wire = wire_before_last_response(turn)
            settle(sim, rid)
            assert normalize(sim.context_items(rid)) == wire
            checked.append(len(turn.blocks))
            return turn

        return handler

    async with httpx.AsyncClient(transport=_NoConversationEcho(), timeout=30) as client:
        eng = engine(sim, mode="conversation", http=client, metrics=metrics)
        session = gp.Session(with_middleware(eng, middleware), tools=[get_weather])
        for i in range(6):
            if i:
                sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": f"city{i}"})]))
            sim.queue(Reply(text=f"It is sunny {i}, and that is all there is to say about it today."))
            out = await session.run(f"weather in city{i}?")
    posts = [r for r in sim.requests if r.method == "POST" and r.path == "/v1/responses"]
    assert len(posts) == len(checked) == 11
    conversations = {p.body.get("conversation") for p in posts}
    assert len(conversations) == 1 and None not in conversations  # one conversation, every request in it
    assert metrics.counters["fallback"] == 0 and eng.server_ignores_state is False
    verdict = eng.endpoint_verdict
    assert verdict is not None and verdict.kept and verdict.evidence in ("usage", "input_tokens")
    assert [b.text for b in out.blocks if b.kind is BlockKind.LLM_TEXT][-1].startswith("It is sunny 5")
    extra = [f"{r.method} {r.path}" for r in sim.requests if r.path.startswith("/v1/responses/")]
    assert len(extra) <= 1


def test_the_stripping_proxy_strips() -> None:
    data = b'event: response.created\ndata: {"response": {"id": "r", "conversation": {"id": "c"}}}\n\n'
    assert b"conversation" not in _strip(data) and b'"id": "r"' in _strip(data)


async def test_an_echo_that_comes_only_with_the_terminal_event_releases_the_held_text(sim: Simulator) -> None:
    texts: list[str] = []
    transport = _NoConversationEcho("previous_response_id", only="response.created")
    async with httpx.AsyncClient(transport=transport, timeout=30) as client:
        eng = engine(sim, http=client)
        session = gp.Session(eng, sinks=[lambda e: texts.append(e.delta) if isinstance(e, EventTextDelta) else None])
        sim.queue(Reply(text="One."), Reply(text="Two, in a few words."))
        await session.run("a")
        out = await session.run("b")
    assert "".join(texts) == "One.Two, in a few words." and out.blocks[-1].text == "Two, in a few words."
    verdict = eng.endpoint_verdict
    assert verdict is not None and verdict.echo and verdict.evidence == "echo"
    assert [r.method for r in sim.requests] == ["POST", "POST"]
