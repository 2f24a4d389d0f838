"""What a retry sends after a failure once the request went out: a response whose id arrived is read back
(never created again), a conversation's items are read before its input goes in a second time."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
from responses_support import engine, normalize

import geppetto as gp
from geppetto.middleware import tool_loop
from geppetto.providers._http import HttpTransport
from geppetto.providers._retry import RetryPolicy
from geppetto.providers.openai_responses import ConversationState, ResponsesMetrics
from geppetto.providers.openai_responses._state import get_state, set_state
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import BLOCK_META_RESPONSE_ID, Block, Turn

CREATED = 1
"""Stream events up to and including ``response.created`` (the first event names the response)."""
TWO_DELTAS = 6
"""Stream events up to the second text delta of a three-word answer (the simulator sends one per word)."""


def _start(mode: str | None = None) -> Turn:
    turn = Turn(blocks=[Block.system("be brief"), Block.user("weather in Paris?")])
    if mode is not None:
        set_state(turn, ConversationState(mode=mode))
    return turn


def _posts(sim: Simulator) -> list[dict[str, Any]]:
    return [r.body for r in sim.requests if r.method == "POST" and r.path == "/v1/responses"]


def _conversation_items(sim: Simulator, conversation_id: str) -> list[dict[str, Any]]:
    with sim.state.lock:
        return list(sim.state.conversations[conversation_id].items)


async def test_a_chained_stream_cut_after_created_is_read_back_not_sent_again(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Sunny and warm."))
    eng = engine(sim)
    turn = await eng.run_inference(_start())
    turn.append(Block.user("and tomorrow?"))
    sim.fail_next(drop_after=TWO_DELTAS, finish_after_cut=True, finish_delay=0.05)
    texts: list[str] = []
    with gp.events.with_sinks(lambda e: texts.append(e.delta) if isinstance(e, gp.events.EventTextDelta) else None):
        turn = await eng.run_inference(turn)
    assert turn.blocks[-1].text == "Sunny and warm."
    posts = _posts(sim)
    assert len(posts) == 2 and posts[1]["previous_response_id"]  # the step was sent once
    rid = str(turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)])
    gets = [r.path for r in sim.requests if r.method == "GET"]
    assert f"/v1/responses/{rid}" in gets
    assert len(texts) == 3 and "".join(texts) == "Sunny and warm."  # two streamed, the rest read back
    # the Turn anchors on the response read back: the next request chains on it
    sim.queue(Reply(text="Three."))
    turn.append(Block.user("more"))
    await eng.run_inference(turn)
    assert _posts(sim)[-1]["previous_response_id"] == rid


async def test_a_tool_loop_broken_after_created_runs_each_tool_once(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]), Reply(text="Sunny."))
    ran: list[str] = []

    def get_weather(city: str) -> str:
        """Weather for a city."""
        ran.append(city)
        return f"sunny in {city}"

    sim.fail_next(drop_after=CREATED, finish_after_cut=True)
    eng = gp.with_middleware(engine(sim), tool_loop(gp.ToolRegistry([get_weather])))
    turn = await eng.run_inference(_start())
    assert turn.blocks[-1].text == "Sunny." and ran == ["Paris"]
    posts = _posts(sim)
    assert len(posts) == 2  # one per step: the broken first step was read back
    assert normalize(posts[1]["input"]) == [("function_call_output", turn.blocks[2].payload["id"], "sunny in Paris")]


async def test_a_cut_stream_the_server_did_not_keep_says_a_retry_is_safe(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="lost"))
    sim.fail_next(drop_after=CREATED + 1)  # the generation is aborted with the stream: nothing stored
    turn = _start()
    with pytest.raises(gp.StreamError, match="did not land, so sending the request again is safe"):
        await engine(sim).run_inference(turn)
    assert len(_posts(sim)) == 1 and [b.kind for b in turn.blocks] == [gp.BlockKind.SYSTEM, gp.BlockKind.USER]


async def test_store_false_is_not_read_back(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="lost"))
    sim.fail_next(drop_after=CREATED + 1, finish_after_cut=True)
    with pytest.raises(gp.StreamError) as caught:
        await engine(sim, store=False).run_inference(_start())
    assert "did not land" not in str(caught.value)
    assert [r.method for r in sim.requests] == ["POST"]  # nothing to read back: the server keeps nothing


async def test_conversation_cut_after_the_input_was_stored_holds_the_input_once(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."))
    eng = engine(sim, mode="conversation")
    turn = await eng.run_inference(_start())
    cid = str(get_state(turn).conversation_id)  # type: ignore[union-attr]
    turn.append(Block.user("and tomorrow?"))
    sim.fail_next(drop_after=CREATED, finish_after_cut=True, finish_delay=0.05)
    turn = await eng.run_inference(turn)
    assert turn.blocks[-1].text == "Two." and len(_posts(sim)) == 2
    users = [i for i in _conversation_items(sim, cid) if i.get("role") == "user"]
    assert [normalize([u]) for u in users] == [
        [("message", "user", "weather in Paris?")],
        [("message", "user", "and tomorrow?")],
    ]
    # the conversation goes on from the answer read back, in the same conversation
    sim.queue(Reply(text="Three."))
    turn.append(Block.user("more"))
    turn = await eng.run_inference(turn)
    assert get_state(turn).conversation_id == cid  # type: ignore[union-attr]
    assert normalize(_posts(sim)[-1]["input"]) == [("message", "user", "more")]


class _LostAnswer(httpx.AsyncBaseTransport):
    """Sends each request to the simulator; the ``lose``-th POST /responses reaches it and is answered
    whole there, but the client gets a broken connection instead of the answer (as when a connection
    breaks after the request went out)."""

    def __init__(self, lose: int) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.lose, self.posts = lose, 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method == "POST" and request.url.path.endswith("/responses"):
            self.posts += 1
            if self.posts == self.lose:
                await response.aread()  # the server ran to its end and stored the answer
                await response.aclose()
                raise httpx.ReadError("connection reset by peer", request=request)
        return response


def _lossy_engine(sim: Simulator, lose: int, **kw: Any) -> gp.Engine:
    transport = HttpTransport(
        sim.openai_url,
        provider="openai",
        transport=_LostAnswer(lose),
        retry=RetryPolicy(max_retries=2, initial_delay=0.0),
    )
    return engine(sim, http=transport, **kw)


async def test_conversation_request_that_landed_is_not_appended_again(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."))
    eng = _lossy_engine(sim, lose=2, mode="conversation")
    turn = await eng.run_inference(_start())
    cid = str(get_state(turn).conversation_id)  # type: ignore[union-attr]
    turn.append(Block.user("and tomorrow?"))
    with caplog.at_level(logging.WARNING, "geppetto.providers"):
        turn = await eng.run_inference(turn)
    assert turn.blocks[-1].text == "Two.", "the answer is read from the conversation"
    assert len(_posts(sim)) == 2  # the transport did not send it a second time
    users = [i for i in _conversation_items(sim, cid) if i.get("role") == "user"]
    assert len(users) == 2  # the input is in the conversation once
    assert "after it reached the server; not sent again" in caplog.text
    # the conversation goes on from the answer read there: only the next input is sent
    sim.queue(Reply(text="Three."))
    turn.append(Block.user("more"))
    turn = await eng.run_inference(turn)
    assert turn.blocks[-1].text == "Three." and get_state(turn).conversation_id == cid  # type: ignore[union-attr]
    assert normalize(_posts(sim)[-1]["input"]) == [("message", "user", "more")]
    assert [normalize([u]) for u in _conversation_items(sim, cid) if u.get("role") == "user"] == [
        [("message", "user", "weather in Paris?")],
        [("message", "user", "and tomorrow?")],
        [("message", "user", "more")],
    ]


async def test_a_seeding_request_that_landed_is_not_seeded_again(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="Two."))
    eng = _lossy_engine(sim, lose=1, mode="conversation")
    turn = Turn(blocks=[Block.user("weather in Paris?"), Block.llm_text("One."), Block.user("and tomorrow?")])
    turn = await eng.run_inference(turn)  # a Turn made elsewhere: its history seeds a new conversation
    assert turn.blocks[-1].text == "Two."
    cid = str(get_state(turn).conversation_id)  # type: ignore[union-attr]
    assert len(_posts(sim)) == 1 and len(sim.state.conversations) == 1
    assert [normalize([i]) for i in _conversation_items(sim, cid)][:3] == [
        [("message", "user", "weather in Paris?")],
        [("message", "assistant", "One.")],
        [("message", "user", "and tomorrow?")],
    ]
    assert len(_conversation_items(sim, cid)) == 4, "the seed, the input and the answer, each once"


async def test_conversation_request_that_did_not_land_is_sent_again(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."))
    metrics = ResponsesMetrics()
    eng = engine(sim, mode="conversation", metrics=metrics)
    turn = await eng.run_inference(_start())

    class _Refused(httpx.AsyncBaseTransport):
        """The next POST /responses breaks before it reaches the server (a reset while it is written)."""

        def __init__(self) -> None:
            self.inner, self.broke = httpx.AsyncHTTPTransport(), False

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if request.method == "POST" and request.url.path.endswith("/responses") and not self.broke:
                self.broke = True
                raise httpx.ReadError("connection reset by peer", request=request)
            return await self.inner.handle_async_request(request)

    http = HttpTransport(sim.openai_url, provider="openai", transport=_Refused(), retry=RetryPolicy(initial_delay=0.0))
    again = engine(sim, mode="conversation", http=http, metrics=metrics)
    turn.append(Block.user("and tomorrow?"))
    turn = await again.run_inference(turn)
    assert turn.blocks[-1].text == "Two."
    cid = str(get_state(turn).conversation_id)  # type: ignore[union-attr]
    assert [r.path for r in sim.requests][-2:] == [f"/v1/conversations/{cid}/items", "/v1/responses"]
    assert "retried_unknown" not in metrics.counters  # proven not landed: not an unknown outcome


class _LostItemsAnswer(httpx.AsyncBaseTransport):
    """The first ``POST /conversations/{id}/items`` reaches the simulator and its items go in, but the client
    gets a broken connection instead of the answer."""

    def __init__(self) -> None:
        self.inner, self.lost = httpx.AsyncHTTPTransport(), False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method == "POST" and request.url.path.endswith("/items") and not self.lost:
            self.lost = True
            await response.aread()
            await response.aclose()
            raise httpx.ReadError("connection reset by peer", request=request)
        return response


async def test_a_long_seed_whose_added_items_landed_is_put_in_once(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="Done."))
    http = HttpTransport(
        sim.openai_url, provider="openai", transport=_LostItemsAnswer(), retry=RetryPolicy(initial_delay=0.0)
    )
    eng = engine(sim, http=http, mode="conversation")
    history = [Block.user(f"question {i}") if i % 2 == 0 else Block.llm_text(f"answer {i}") for i in range(30)]
    turn = await eng.run_inference(Turn(blocks=[*history, Block.user("last question")]))
    assert turn.blocks[-1].text == "Done."
    cid = str(get_state(turn).conversation_id)  # type: ignore[union-attr]
    texts = [normalize([i])[0][2] for i in _conversation_items(sim, cid)]
    assert texts == [*(b.text for b in history), "last question", "Done."], "the seed once, in order"
    adds = [r for r in sim.requests if r.method == "POST" and r.path.endswith("/items")]
    assert len(adds) == 1, "the add whose answer was lost is not sent again"
