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
from geppetto.server._runner import Busy, Runner
from geppetto.session.stores import RecordedEvent, SQLTurnStore, open_store
from geppetto.session.stores._background import BackgroundRecord, background_response, save_background_response
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
        "INSERT INTO background_responses (session_id, inference_id, response_id, sequence_number, turn, updated_at) "
        "VALUES ('s1', 'dead-1', 'resp_x', 3, 'not json', 0)",
    )
    with caplog.at_level(logging.WARNING, logger="geppetto.server"):
        await runner.sweep()  # seen once
        await runner.sweep()  # twice: settled
    [record] = await store.inferences("s1")
    assert (record.status, record.error) == ("failed", "the worker running it (gone:1) stopped before it ended")
    assert any("could not read the background response of inference dead-1" in r.getMessage() for r in caplog.records)


async def _dead_worker(runner: Runner, sim: Simulator) -> str:
    """A response a worker read up to sequence number 5 (the first delta) before it died, as that worker
    recorded it; its id."""
    store = _store(runner)
    sim.queue(Reply(text=LONG))
    sim.fail_next(drop_after=6)
    body = {"model": "sim-1", "input": "Tell me a story", "background": True, "store": True, "stream": True}
    async with httpx.AsyncClient(headers={"authorization": "Bearer k"}) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            async with client.stream("POST", f"{sim.openai_url}/responses", json=body) as response:
                async for _ in response.aiter_lines():
                    pass
    rid = next(iter(sim.state.background_runs))
    turn = Turn()
    turn.append(Block.user("Tell me a story"))
    await store.begin_inference("s1", "dead-1", worker="gone:1", prompt="Tell me a story")
    await save_background_response(store, "s1", "dead-1", rid, turn_to_dict(turn))
    await _background.save_background_cursor(store, "s1", "dead-1", rid, 5)
    return rid


async def test_a_prompt_to_the_session_picks_the_dead_workers_inference_up(
    runner: Runner, geppetto_sim: Simulator
) -> None:
    await _dead_worker(runner, geppetto_sim)
    with pytest.raises(Busy, match="is finishing inference dead-1, which a worker that stopped was running"):
        await runner.start("s1", "Something else")
    async with asyncio.timeout(20):
        await runner._running["s1"].done.wait()
    assert [(i.inference_id, i.status) for i in await _store(runner).inferences("s1")] == [("dead-1", "completed")]
    geppetto_sim.queue(Reply(text="Now this."))
    again = await runner.start("s1", "Something else")
    async with asyncio.timeout(20):
        await runner._running["s1"].done.wait()
    statuses = [(i.inference_id, i.status) for i in await _store(runner).inferences("s1")]
    assert statuses == [("dead-1", "completed"), (again.inference_id, "completed")]


async def recorded(store: SQLTurnStore, inference_id: str, at_least: int) -> BackgroundRecord:
    """The background record of ``inference_id`` once its cursor has reached ``at_least``."""
    found = None
    async with asyncio.timeout(20):
        while found is None or found.cursor < at_least:
            await asyncio.sleep(0.02)
            found = await background_response(store, "s1", inference_id)
    return found


async def picked_up(runner: Runner, store: SQLTurnStore, answer: str) -> None:
    """``runner``'s sweeps pick up the inference of session s1 another worker left and finish it with ``answer``."""
    await runner.sweep()
    await runner.sweep()
    async with asyncio.timeout(20):
        await runner._running["s1"].done.wait()
    [record] = await store.inferences("s1")
    assert record.status == "completed"
    latest = await store.load_latest("s1")
    assert latest is not None and [b.text for b in latest.blocks] == ["Tell me a story", answer]


async def handed_over(
    first: Runner, second: Runner, store: SQLTurnStore, sim: Simulator, inference_id: str, answer: str
) -> tuple[list[RecordedEvent], BackgroundRecord | None]:
    """``first`` shuts down (its inference cancelled in that worker only, left running on the server) and
    ``second``'s sweeps pick the inference up and finish it with ``answer``: the events both workers logged
    (each worker's own record, checked to hold every delta once) and the background record ``first`` left."""
    await first.close(grace=0)
    [record] = await store.inferences("s1")
    assert record.status == "running", "left running for another worker"
    assert not [r for r in sim.requests if r.path.endswith("/cancel")], "the background run goes on"
    left = await background_response(store, "s1", inference_id)
    await picked_up(second, store, answer)
    logged = await store.load_events("s1", inference_id)
    kinds = [e.type for e in logged]
    assert kinds[0] == "start" and kinds.count("start") == 2 and kinds[-1] == "final"
    assert "".join(e.event.get("delta", "") for e in logged) == answer, "every delta once"
    return logged, left


async def test_a_worker_that_stops_leaves_its_background_inference_to_another(
    tmp_path: Path, geppetto_sim: Simulator
) -> None:
    store, bus = open_store(tmp_path / "store.db"), MemoryBus()
    first = Runner(store, bus, lambda settings: geppetto_sim.engine(background=True), sweep_interval=0)
    second = Runner(store, bus, lambda settings: geppetto_sim.engine(background=True), sweep_interval=0)
    try:
        await store.create_session("s1", {})
        geppetto_sim.background_pace = 0.02
        geppetto_sim.queue(Reply(text=LONG))
        started = await first.start("s1", "Tell me a story")
        await recorded(store, started.inference_id, 6)
        logged, _ = await handed_over(first, second, store, geppetto_sim, started.inference_id, LONG)
        kinds = [e.type for e in logged]
        assert kinds[kinds.index("interrupt") + 1] == "start", "the stopped worker's part, then the other's"
        assert [e.seq for e in logged] == sorted(e.seq for e in logged)
    finally:
        await second.close()
        store.close()


async def test_a_dead_workers_response_is_picked_up_from_its_cursor(runner: Runner, geppetto_sim: Simulator) -> None:
    store = _store(runner)
    await _dead_worker(runner, geppetto_sim)
    await picked_up(runner, store, LONG)
    events = await _events(runner)
    assert [e["type"] for e in events if e["type"] in ("start", "run_started")] == [], "the dead worker sent those"
    assert "".join(e.get("delta", "") for e in events if e["type"] == "text_delta") == LONG.removeprefix("word0 ")
    assert events[-1]["type"] == "run_finished" and events[-1]["status"] == "completed"
    assert {e["inference_id"] for e in events} == {"dead-1"}
    assert [r.query for r in geppetto_sim.requests if r.method == "GET"] == [{"stream": "true", "starting_after": "5"}]
