"""A worker's runner with a background engine, in one process: what it records while a response runs and
forgets at the end, a store that refuses those records (the inference goes on, one warning each), a record
it cannot read (the stale inference is settled as before), and the pickup of a response a dead worker was
reading."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from geppetto.events.bus import MemoryBus
from geppetto.server import _background
from geppetto.server._runner import Runner
from geppetto.session.stores import SQLTurnStore, open_store
from geppetto.session.stores._background import background_response, save_background_response
from geppetto.simulator import Reply, Simulator
from geppetto.turns import Block, Turn, turn_to_dict

LONG = " ".join(f"word{i}" for i in range(40))


@pytest.fixture
async def runner(tmp_path: Path, geppetto_sim: Simulator) -> AsyncIterator[Runner]:
    store = open_store(tmp_path / "store.db")
    bus = MemoryBus()
    the_runner = Runner(store, bus, lambda settings: geppetto_sim.engine(background=True), sweep_interval=0)
    await store.create_session("s1", {})
    try:
        yield the_runner
    finally:
        await the_runner.close()
        store.close()


def _store(runner: Runner) -> SQLTurnStore:
    return runner.store


async def _events(runner: Runner) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    last = await runner.bus.last_id("s1")
    async for event in runner.bus.subscribe("s1"):
        out.append(event.data)
        if event.id == last:
            return out
    return out


async def test_the_response_is_recorded_while_it_runs_and_forgotten_at_the_end(
    runner: Runner, geppetto_sim: Simulator
) -> None:
    geppetto_sim.background_pace = 0.02
    geppetto_sim.queue(Reply(text=LONG))
    started = await runner.start("s1", "Tell me a story")
    seen = None
    async with asyncio.timeout(20):
        while seen is None or seen.cursor < 8:
            await asyncio.sleep(0.02)
            seen = await background_response(_store(runner), "s1", started.inference_id)
        await runner._running["s1"].done.wait()
    assert [b.text for b in seen.turn.blocks] == ["Tell me a story"], "the Turn the engine sent"
    assert seen.response_id == next(iter(geppetto_sim.state.background_runs))
    assert await background_response(_store(runner), "s1", started.inference_id) is None
    assert [i.status for i in await _store(runner).inferences("s1")] == ["completed"]


async def test_a_store_that_refuses_the_records_leaves_the_inference_going(
    runner: Runner, geppetto_sim: Simulator, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def refuse(*args: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(_background, "save_background_response", refuse)
    monkeypatch.setattr(_background, "save_background_cursor", refuse)
    geppetto_sim.queue(Reply(text=LONG))
    with caplog.at_level(logging.WARNING, logger="geppetto.server"):
        await runner.start("s1", "Tell me a story")
        async with asyncio.timeout(20):
            await runner._running["s1"].done.wait()
    assert [i.status for i in await _store(runner).inferences("s1")] == ["completed"]
    warnings = [r.getMessage() for r in caplog.records if "could not record" in r.getMessage()]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("could not record the response of background response resp_")
    assert warnings[1].startswith("could not record the cursor of background response resp_")
    assert all("disk full" in w and "another cannot pick the inference up" in w for w in warnings)


async def test_an_unreadable_record_is_settled_as_before(runner: Runner, caplog: pytest.LogCaptureFixture) -> None:
    store = _store(runner)
    await store.begin_inference("s1", "dead-1", worker="gone:1", prompt="Hello")
    await store._run(
        store._exec,
        "INSERT INTO background_responses VALUES ('s1', 'dead-1', 'resp_x', 3, 'not json', 0)",
    )
    with caplog.at_level(logging.WARNING, logger="geppetto.server"):
        await runner.sweep()  # seen once
        await runner.sweep()  # twice: settled
    [record] = await store.inferences("s1")
    assert (record.status, record.error) == ("failed", "the worker running it (gone:1) stopped before it ended")
    assert any("could not read the background response of inference dead-1" in r.getMessage() for r in caplog.records)


async def test_a_dead_workers_response_is_picked_up_from_its_cursor(runner: Runner, geppetto_sim: Simulator) -> None:
    store = _store(runner)
    geppetto_sim.queue(Reply(text=LONG))
    geppetto_sim.fail_next(drop_after=6)  # the dead worker read up to sequence number 5 (the first delta)
    body = {"model": "sim-1", "input": "Tell me a story", "background": True, "store": True, "stream": True}
    async with httpx.AsyncClient(headers={"authorization": "Bearer k"}) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            async with client.stream("POST", f"{geppetto_sim.openai_url}/responses", json=body) as response:
                async for _ in response.aiter_lines():
                    pass
    rid = next(iter(geppetto_sim.state.background_runs))
    turn = Turn()
    turn.append(Block.user("Tell me a story"))
    await store.begin_inference("s1", "dead-1", worker="gone:1", prompt="Tell me a story")
    await save_background_response(store, "s1", "dead-1", rid, turn_to_dict(turn))
    await _background.save_background_cursor(store, "s1", "dead-1", rid, 5)
    await runner.sweep()
    await runner.sweep()
    async with asyncio.timeout(20):
        await runner._running["s1"].done.wait()
    [record] = await store.inferences("s1")
    assert record.status == "completed"
    latest = await store.load_latest("s1")
    assert latest is not None and [b.text for b in latest.blocks] == ["Tell me a story", LONG]
    events = await _events(runner)
    assert [e["type"] for e in events if e["type"] in ("start", "run_started")] == [], "the dead worker sent those"
    assert "".join(e.get("delta", "") for e in events if e["type"] == "text_delta") == LONG.removeprefix("word0 ")
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "completed"
    assert {e["inference_id"] for e in events} == {"dead-1"}
    assert [r.query for r in geppetto_sim.requests if r.method == "GET"] == [{"stream": "true", "starting_after": "5"}]
