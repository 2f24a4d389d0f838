"""A worker's runner with a foreground (streaming, not background) Responses engine, in one process: the
response id is recorded once ``response.created`` arrives, and a worker that stops after it leaves the step to
another worker, which reads the response back with ``GET /responses/{id}`` instead of a second
``POST /responses``; a response the server proves it does not hold (404) is the one case sent again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from geppetto.events.bus import MemoryBus
from geppetto.server._runner import Runner
from geppetto.session.stores import SQLTurnStore, open_store
from geppetto.session.stores._background import background_response, save_background_response
from geppetto.simulator import Reply, Simulator
from geppetto.turns import BLOCK_META_RESPONSE_ID, Block, Turn, turn_to_dict

ANSWER = "It is sunny in Paris today."


def _engine(sim: Simulator) -> Any:
    return sim.engine(poll_interval=0.05)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLTurnStore]:
    the_store = open_store(tmp_path / "store.db")
    await the_store.create_session("s1", {})
    try:
        yield the_store
    finally:
        the_store.close()


def _posts(sim: Simulator) -> list[Any]:
    return [r for r in sim.requests if r.method == "POST" and r.path == "/v1/responses"]


async def _picked_up_by(runner: Runner, store: SQLTurnStore) -> list[dict[str, Any]]:
    """``runner``'s sweeps pick up the inference of session s1 another worker left; its events once done."""
    after = await runner.bus.last_id("s1")
    await runner.sweep()
    await runner.sweep()
    async with asyncio.timeout(20):
        await runner._running["s1"].done.wait()
    [record] = await store.inferences("s1")
    assert record.status == "completed"
    latest = await store.load_latest("s1")
    assert latest is not None and [b.text for b in latest.blocks] == ["Weather in Paris?", ANSWER]
    events: list[dict[str, Any]] = []
    last = await runner.bus.last_id("s1")
    async for event in runner.bus.subscribe("s1", after):
        events.append(event.data)
        if event.id == last:
            break
    return events


async def _dead_worker(store: SQLTurnStore, sim: Simulator, *, kept: bool) -> str:
    """A foreground request a worker sent and whose stream it read up to ``response.created`` before it died,
    as that worker recorded it; the server finished and stored the answer when ``kept``. Its response id."""
    sim.queue(Reply(text=ANSWER))
    sim.fail_next(drop_after=1, finish_after_cut=kept)
    body = {"model": "sim-1", "input": "Weather in Paris?", "store": True, "stream": True}
    async with httpx.AsyncClient(headers={"authorization": "Bearer k"}) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            async with client.stream("POST", f"{sim.openai_url}/responses", json=body) as response:
                async for _ in response.aiter_lines():
                    pass
    [post] = _posts(sim)
    turn = Turn()
    turn.append(Block.user("Weather in Paris?"))
    await store.begin_inference("s1", "dead-1", worker="gone:1", prompt="Weather in Paris?")
    rid = "resp_unknown"
    if kept:
        with sim.state.lock:
            rid = next(iter(sim.state.responses))
    await save_background_response(store, "s1", "dead-1", rid, turn_to_dict(turn))
    assert post.body["input"] == "Weather in Paris?"
    return rid


async def test_a_foreground_run_records_its_response_id_and_forgets_it_at_the_end(
    store: SQLTurnStore, geppetto_sim: Simulator
) -> None:
    runner = Runner(store, MemoryBus(), lambda settings: _engine(geppetto_sim), sweep_interval=0)
    try:
        geppetto_sim.queue(Reply(text=ANSWER))
        geppetto_sim.fail_next(stall_after=1, stall_seconds=0.5, finish_after_cut=True)
        started = await runner.start("s1", "Weather in Paris?")
        found = None
        async with asyncio.timeout(20):
            while found is None:
                await asyncio.sleep(0.02)
                found = await background_response(store, "s1", started.inference_id)
            await runner._running["s1"].done.wait()
        with geppetto_sim.state.lock:
            assert found.response_id in geppetto_sim.state.responses
        assert [b.text for b in found.turn.blocks] == ["Weather in Paris?"], "the Turn the engine sent"
        assert await background_response(store, "s1", started.inference_id) is None
        assert len(_posts(geppetto_sim)) == 1, "the stalled stream was read back once it broke"
    finally:
        await runner.close()


async def test_a_worker_that_stops_after_response_created_leaves_the_step_read_back(
    store: SQLTurnStore, geppetto_sim: Simulator
) -> None:
    bus = MemoryBus()
    first = Runner(store, bus, lambda settings: _engine(geppetto_sim), sweep_interval=0)
    second = Runner(store, bus, lambda settings: _engine(geppetto_sim), sweep_interval=0)
    try:
        geppetto_sim.queue(Reply(text=ANSWER))
        geppetto_sim.fail_next(stall_after=1, stall_seconds=0.5, finish_after_cut=True)
        started = await first.start("s1", "Weather in Paris?")
        found = None
        async with asyncio.timeout(20):
            while found is None:
                await asyncio.sleep(0.02)
                found = await background_response(store, "s1", started.inference_id)
        await first.close(grace=0)  # mid-stream, after response.created: left for another worker
        [record] = await store.inferences("s1")
        assert record.status == "running"
        events = await _picked_up_by(second, store)
        assert len(_posts(geppetto_sim)) == 1, "no second POST /responses for the step"
        latest = await store.load_latest("s1")
        assert latest is not None
        rid = latest.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]
        assert f"/v1/responses/{rid}" in [r.path for r in geppetto_sim.requests if r.method == "GET"]
        assert [e["type"] for e in events if e["type"] in ("final", "run_finished")] == ["final", "run_finished"]
        assert {e["inference_id"] for e in events} == {started.inference_id}
        everything = []  # what a reader connected through the handoff got: each event once
        async for event in bus.subscribe("s1"):
            everything.append(event.data)
            if event.data["type"] == "run_finished":
                break
        kinds = [e["type"] for e in everything]
        assert [k for k in kinds if k in ("run_started", "start", "final", "run_finished")] == [
            "run_started",
            "start",
            "final",
            "run_finished",
        ]
    finally:
        await second.close()


async def test_a_dead_workers_foreground_response_is_read_back_not_sent_again(
    store: SQLTurnStore, geppetto_sim: Simulator
) -> None:
    runner = Runner(store, MemoryBus(), lambda settings: _engine(geppetto_sim), sweep_interval=0)
    try:
        rid = await _dead_worker(store, geppetto_sim, kept=True)
        events = await _picked_up_by(runner, store)
        assert len(_posts(geppetto_sim)) == 1, "the dead worker's POST only"
        assert [r.path for r in geppetto_sim.requests if r.method == "GET"] == [f"/v1/responses/{rid}"]
        assert [e["type"] for e in events].count("start") == 0, "the dead worker published the start"
        assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "completed"
    finally:
        await runner.close()


async def test_a_response_the_server_does_not_hold_is_sent_again_once(
    store: SQLTurnStore, geppetto_sim: Simulator
) -> None:
    runner = Runner(store, MemoryBus(), lambda settings: _engine(geppetto_sim), sweep_interval=0)
    try:
        await _dead_worker(store, geppetto_sim, kept=False)
        geppetto_sim.queue(Reply(text=ANSWER))
        await _picked_up_by(runner, store)
        assert [r.path for r in geppetto_sim.requests if r.method == "GET"] == ["/v1/responses/resp_unknown"]
        assert len(_posts(geppetto_sim)) == 2, "proven not to have landed (404): sent again, once"
    finally:
        await runner.close()
