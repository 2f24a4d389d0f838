"""``ResponsesEngine(..., transport="websocket")`` against the simulator's WebSocket mode: a chained tool loop
on one connection, ``store: false`` anchors bound to the connection that made them, errors, closes and idle
timeouts."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from responses_support import normalize, wire_before_last_response

import geppetto as gp
from geppetto._exceptions import BadRequestError, ServerError, StreamError
from geppetto.engine import Handler
from geppetto.events import Event, EventFinal
from geppetto.middleware import with_middleware
from geppetto.providers._retry import RetryPolicy
from geppetto.providers._stateful import ResponsesMetrics
from geppetto.providers._websocket import BLOCK_META_CONNECTION, ResponsesSocket, socket_url
from geppetto.providers.openai_responses import ResponsesEngine, blocks_to_items
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import BLOCK_META_RESPONSE_ID, Block, Turn

pytest.importorskip("websockets")

STEPS = 20


@gp.tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def ws_engine(sim: Simulator, **kw: Any) -> ResponsesEngine:
    kw.setdefault("transport", "websocket")
    return ResponsesEngine("sim-1", api_key="sk-test", base_url=sim.openai_url, **kw)


def creates(sim: Simulator) -> list[Any]:
    return [r for r in sim.requests if r.path == "/v1/responses"]


async def wait_closed(engine: ResponsesEngine) -> None:
    """Until the engine's socket has seen the server close its connection."""
    socket = engine._socket
    assert socket is not None
    deadline = time.monotonic() + 5
    while socket.live() is not None:
        assert time.monotonic() < deadline, "the client never saw the server close the connection"
        await asyncio.sleep(0.005)


def loop(sim: Simulator, engine: ResponsesEngine, after_step: Any = None) -> tuple[gp.Session, list[EventFinal]]:
    """A session over ``engine`` whose model calls are checked (the simulator's context equals the Turn)
    and numbered; ``after_step(n)`` runs after step n."""
    sim.queue(*[Reply(tool_calls=[ToolCall("get_weather", {"city": f"city{i}"})]) for i in range(STEPS - 1)])
    sim.queue(Reply(text="all done"))
    steps = [0]

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            turn = await next_handler(turn)
            rid, wire = wire_before_last_response(turn)
            assert normalize(sim.context_items(rid)) == wire, (
                f"step {steps[0] + 1}: the model's context is not the Turn"
            )
            steps[0] += 1
            if after_step is not None:
                await after_step(steps[0])
            return turn

        return handler

    finals: list[EventFinal] = []

    def sink(event: Event) -> None:
        if isinstance(event, EventFinal):
            finals.append(event)

    inner = with_middleware(engine, middleware)
    session = gp.Session(inner, tools=[get_weather], sinks=[sink], tool_loop_options={"max_iterations": STEPS + 1})
    return session, finals


def assert_delta(request: Any, previous: Any) -> None:
    """A chained request: the previous response's id and only the tool result that came after it."""
    assert request.body["previous_response_id"], "not chained"
    assert [i["type"] for i in request.body["input"]] == ["function_call_output"]


@pytest.mark.parametrize("store", [True, False])
async def test_a_20_step_tool_loop_chains_on_one_connection(geppetto_sim: Simulator, store: bool) -> None:
    engine = ws_engine(geppetto_sim, store=store)
    session, finals = loop(geppetto_sim, engine)
    async with engine:
        out = await session.run("Check the weather in 19 cities, one at a time.")
    sent = creates(geppetto_sim)
    assert out.blocks[-1].text == "all done" and len(sent) == STEPS
    assert {r.method for r in sent} == {"WS"}  # no HTTP request made a response
    assert len({r.query["connection"] for r in sent}) == 1
    assert "previous_response_id" not in sent[0].body and "stream" not in sent[0].body
    assert sent[0].body["type"] == "response.create" and sent[0].body.get("store", True) is store
    for i in range(1, STEPS):
        assert_delta(sent[i], sent[i - 1])
        assert sent[i].body["previous_response_id"] == finals[i - 1].metadata.extra["response_id"]
    assert [f.metadata.extra["responses.fallback"] for f in finals] == [""] * STEPS
    # the proof records the connection on every response's blocks
    socket = engine._socket
    assert socket is not None and socket.connections == 1
    stamped = {BLOCK_META_CONNECTION.get(b.metadata) for b in out.blocks if b.metadata.get(str(BLOCK_META_RESPONSE_ID))}
    assert stamped == {socket.connection_id}


async def test_store_false_after_the_connection_is_killed_at_step_10_reseeds_then_chains(
    geppetto_sim: Simulator,
) -> None:
    metrics = ResponsesMetrics()
    engine = ws_engine(geppetto_sim, store=False, metrics=metrics)

    async def kill(step: int) -> None:
        if step == 10:
            assert geppetto_sim.drop_websockets() == 1
            await wait_closed(engine)

    session, finals = loop(geppetto_sim, engine, kill)
    async with engine:
        out = await session.run("Check the weather in 19 cities, one at a time.")
    sent = creates(geppetto_sim)
    assert out.blocks[-1].text == "all done" and len(sent) == STEPS
    first, second = sent[0].query["connection"], sent[10].query["connection"]
    assert first != second
    assert [r.query["connection"] for r in sent] == [first] * 10 + [second] * 10
    # step 11 sends the whole Turn, no previous_response_id, and says why
    reseed = sent[10].body
    assert "previous_response_id" not in reseed
    assert len(reseed["input"]) == 1 + 2 * 10  # the prompt, then ten calls and their results
    assert normalize(reseed["input"])[0] == ("message", "user", "Check the weather in 19 cities, one at a time.")
    fallbacks = [f.metadata.extra["responses.fallback"] for f in finals]
    assert fallbacks == [""] * 10 + ["connection_state_lost"] + [""] * 9
    assert "ended" in finals[10].metadata.extra["responses.detail"]
    assert metrics.counters["fallback:connection_state_lost"] == 1 and metrics.counters["fallback"] == 1
    # the rest chain again, on the new connection
    for i in range(11, STEPS):
        assert_delta(sent[i], sent[i - 1])
    socket = engine._socket
    assert socket is not None and socket.connections == 2
    step11 = finals[10].metadata.extra["response_id"]
    made = [
        BLOCK_META_CONNECTION.get(b.metadata)
        for b in out.blocks
        if b.metadata.get(str(BLOCK_META_RESPONSE_ID)) == step11
    ]
    assert made and set(made) == {socket.connection_id}


async def test_store_true_after_a_reconnect_chains_on_the_stored_response(geppetto_sim: Simulator) -> None:
    engine = ws_engine(geppetto_sim, store=True)

    async def kill(step: int) -> None:
        if step == 10:
            geppetto_sim.drop_websockets()
            await wait_closed(engine)

    session, finals = loop(geppetto_sim, engine, kill)
    async with engine:
        await session.run("Check the weather in 19 cities, one at a time.")
    sent = creates(geppetto_sim)
    assert len({r.query["connection"] for r in sent}) == 2
    for i in range(1, STEPS):
        assert_delta(sent[i], sent[i - 1])
    assert [f.metadata.extra["responses.fallback"] for f in finals] == [""] * STEPS


async def test_an_error_on_the_socket_is_the_http_paths_error_and_the_connection_stays(
    geppetto_sim: Simulator,
) -> None:
    socket = ResponsesSocket(socket_url(geppetto_sim.openai_url), retry=RetryPolicy(initial_delay=0.01))
    engine = ws_engine(geppetto_sim, store=False, transport=socket)
    turn = Turn(blocks=[Block.user("hi")])
    async with engine:
        geppetto_sim.fail_next(500, times=3)  # more than the two retries
        with pytest.raises(ServerError) as failed:
            await engine.run_inference(turn)
        assert failed.value.status == 500
        geppetto_sim.fail_next(400)
        with pytest.raises(BadRequestError):  # not retried
            await engine.run_inference(turn)
        geppetto_sim.fail_next(503)  # retried once, then answered
        await engine.run_inference(turn)
        turn.append(Block.user("again"))
        await engine.run_inference(turn)
    sent = creates(geppetto_sim)
    assert len(sent) == 3 + 1 + 2 + 1
    assert len({r.query["connection"] for r in sent}) == 1  # an error event leaves the connection open
    assert sent[-1].body["previous_response_id"] and normalize(sent[-1].body["input"]) == [("message", "user", "again")]


async def test_a_parent_the_server_no_longer_has_is_resent_whole_over_the_socket(geppetto_sim: Simulator) -> None:
    engine = ws_engine(geppetto_sim, store=True)
    turn = Turn(blocks=[Block.user("hi")])
    async with engine:
        await engine.run_inference(turn)
        rid = turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]
        turn.append(Block.user("again"))
        # the connection's own cache would still serve it: a new connection, where only the store could
        geppetto_sim.drop_websockets()
        await wait_closed(engine)
        geppetto_sim.fail_next(forget=rid)
        await engine.run_inference(turn)
    sent = creates(geppetto_sim)
    assert sent[1].body["previous_response_id"] == rid
    assert "previous_response_id" not in sent[2].body
    assert normalize(sent[2].body["input"]) == normalize(blocks_to_items(turn.blocks[:-1]))


async def test_the_server_closing_mid_answer_is_a_stream_error_and_the_next_request_reconnects(
    geppetto_sim: Simulator,
) -> None:
    engine = ws_engine(geppetto_sim, store=False)
    turn = Turn(blocks=[Block.user("hi")])
    async with engine:
        await engine.run_inference(turn)
        turn.append(Block.user("again"))
        geppetto_sim.fail_next(drop_after=3)
        with pytest.raises(StreamError, match="closed the WebSocket connection while the answer streamed"):
            await engine.run_inference(turn)
        finals: list[EventFinal] = []
        session = gp.Session(engine, sinks=[lambda e: finals.append(e) if isinstance(e, EventFinal) else None])
        session.append(turn)
        await session.run("once more")
    sent = creates(geppetto_sim)
    assert sent[-1].query["connection"] != sent[0].query["connection"]
    assert "previous_response_id" not in sent[-1].body
    assert finals[-1].metadata.extra["responses.fallback"] == "connection_state_lost"


async def test_a_client_idle_timeout_opens_a_new_connection_and_reseeds(geppetto_sim: Simulator) -> None:
    socket = ResponsesSocket(socket_url(geppetto_sim.openai_url), idle_timeout=0.05)
    metrics = ResponsesMetrics()
    engine = ws_engine(geppetto_sim, store=False, transport=socket, metrics=metrics)
    turn = Turn(blocks=[Block.user("hi")])
    async with engine:
        await engine.run_inference(turn)
        turn.append(Block.user("again"))
        await engine.run_inference(turn)  # within the timeout: chained
        await asyncio.sleep(0.1)
        turn.append(Block.user("and again"))
        await engine.run_inference(turn)
    sent = creates(geppetto_sim)
    assert sent[1].body["previous_response_id"] and "previous_response_id" not in sent[2].body
    assert socket.connections == 2 and metrics.counters["fallback:connection_state_lost"] == 1


async def test_a_server_idle_timeout_closes_the_connection_and_the_next_request_reseeds(
    geppetto_sim: Simulator,
) -> None:
    geppetto_sim.ws_idle_timeout = 0.1
    metrics = ResponsesMetrics()
    engine = ws_engine(geppetto_sim, store=False, metrics=metrics)
    turn = Turn(blocks=[Block.user("hi")])
    async with engine:
        await engine.run_inference(turn)
        await wait_closed(engine)  # the server closed it (idle)
        turn.append(Block.user("again"))
        await engine.run_inference(turn)
    sent = creates(geppetto_sim)
    assert len({r.query["connection"] for r in sent}) == 2 and "previous_response_id" not in sent[1].body
    assert metrics.counters["fallback:connection_state_lost"] == 1


def test_settings_the_socket_cannot_take_are_refused() -> None:
    with pytest.raises(gp.ConfigurationError, match="background=True is not supported over WebSocket"):
        ResponsesEngine("m", api_key="k", transport="websocket", background=True)
    with pytest.raises(gp.ConfigurationError, match="transport='carrier-pigeon'"):
        ResponsesEngine("m", api_key="k", transport="carrier-pigeon")
    with pytest.raises(gp.ConfigurationError, match="needs the server to store"):
        ResponsesEngine("m", api_key="k", transport="websocket", store=False, mode="conversation")
    # store=False chains over the socket (over HTTP it is stateless)
    assert ResponsesEngine("m", api_key="k", transport="websocket", store=False)._mode_for(None) == "chained"
    assert ResponsesEngine("m", api_key="k", store=False)._mode_for(None) == "stateless"
    assert socket_url("https://api.openai.com/v1") == "wss://api.openai.com/v1/responses"


@pytest.mark.parametrize("store", [True, False])
async def test_a_connection_at_its_age_limit_is_replaced(geppetto_sim: Simulator, store: bool) -> None:
    engine = ws_engine(geppetto_sim, store=store)
    turn = Turn(blocks=[Block.user("hi")])
    async with engine:
        await engine.run_inference(turn)
        geppetto_sim.ws_max_age = 0.3  # the first connection passes it while we wait; a new one does not
        turn.append(Block.user("again"))
        await asyncio.sleep(0.4)
        await engine.run_inference(turn)
    sent = creates(geppetto_sim)
    assert len({r.query["connection"] for r in sent}) == 2
    if store:  # the same request again, on a new connection: it still chains on the stored response
        assert sent[-1].body == sent[-2].body and sent[-1].body["previous_response_id"]
    else:  # the state went with the old connection: the whole Turn
        assert sent[-2].body["previous_response_id"] and "previous_response_id" not in sent[-1].body


async def test_the_plan_the_inspector_shows_knows_the_connection_ended(geppetto_sim: Simulator) -> None:
    engine = ws_engine(geppetto_sim, store=False)
    turn = Turn(blocks=[Block.user("hi")])
    async with engine:
        await engine.run_inference(turn)
        turn.append(Block.user("again"))
        assert engine.plan(turn).previous_response_id  # the connection is open: chained
        geppetto_sim.drop_websockets()
        await wait_closed(engine)
        plan = engine.plan(turn)
    assert plan.full and plan.previous_response_id is None and plan.fallback == "connection_state_lost"


async def test_concurrent_sessions_on_one_engine_take_turns_on_its_connection(geppetto_sim: Simulator) -> None:
    engine = ws_engine(geppetto_sim, store=True)
    turns = [Turn(blocks=[Block.user(f"question {i}")]) for i in range(4)]
    async with engine:
        await asyncio.gather(*(engine.run_inference(t) for t in turns))
    sent = creates(geppetto_sim)
    assert len(sent) == 4 and len({r.query["connection"] for r in sent}) == 1
    for i, turn in enumerate(turns):  # each answer reached its own Turn
        rid = turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]
        assert normalize(geppetto_sim.context_items(rid)) == [("message", "user", f"question {i}")]
        assert BLOCK_META_CONNECTION.get(turn.blocks[-1].metadata) == engine._socket.connection_id  # type: ignore[union-attr]
