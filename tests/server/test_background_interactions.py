"""A worker's runner with ``InteractionsEngine(background=True)``: the background interaction is recorded
(with the event id a resume names) as a background response is, a worker that stops leaves it to another,
which resumes the same interaction after that event id, and a client's stop cancels it and publishes the
usage of what it had produced."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_background_runner import handed_over, recorded

from geppetto.events.bus import MemoryBus
from geppetto.server._runner import Runner
from geppetto.session.stores import SQLTurnStore, open_store
from geppetto.session.stores._background import background_response
from geppetto.simulator import Reply, Simulator

LONG = " ".join(f"word{i}" for i in range(60))
PATH = "/v1beta/interactions"


def _runner(store: SQLTurnStore, bus: MemoryBus, sim: Simulator) -> Runner:
    def engine_for(settings: dict[str, Any]) -> Any:
        return sim.engine("gemini-interactions", background=True, poll_interval=0.05)

    return Runner(store, bus, engine_for, sweep_interval=0)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLTurnStore]:
    the_store = open_store(tmp_path / "store.db")
    await the_store.create_session("s1", {})
    try:
        yield the_store
    finally:
        the_store.close()


async def test_a_worker_that_stops_leaves_its_background_interaction_to_another(
    store: SQLTurnStore, geppetto_sim: Simulator
) -> None:
    sim, bus = geppetto_sim, MemoryBus()
    first, second = _runner(store, bus, sim), _runner(store, bus, sim)
    try:
        sim.background_pace = 0.02
        sim.queue(Reply(text=LONG))
        started = await first.start("s1", "Tell me a story")
        found = await recorded(store, started.inference_id, 8)
        assert found.response_id == next(iter(sim.state.background_runs)), "the interaction's id"
        assert found.resume_after, "the event id a resume names"
        assert [b.text for b in found.turn.blocks] == ["Tell me a story"], "the Turn the engine sent"
        _, left = await handed_over(first, second, store, sim, started.inference_id, LONG)
        assert left is not None and left.resume_after
        posts = [r for r in sim.requests if r.method == "POST" and r.path == PATH]
        gets = [r for r in sim.requests if r.method == "GET"]
        assert len(posts) == 1, "one interaction: the other worker read the same one on"
        assert gets[0].path == f"{PATH}/{found.response_id}"
        assert gets[0].query == {"stream": "true", "last_event_id": left.resume_after}
        assert await background_response(store, "s1", started.inference_id) is None, "forgotten at the end"
        # the session goes on chained on that interaction
        sim.queue(Reply(text="The end."))
        again = await second.start("s1", "And then?")
        async with asyncio.timeout(20):
            await second._running["s1"].done.wait()
        assert [i.status for i in await store.inferences("s1")] == ["completed", "completed"]
        assert again.inference_id and sim.requests[-1].body["previous_interaction_id"] == found.response_id
    finally:
        await first.close()
        await second.close()


async def test_a_stop_cancels_the_interaction_and_publishes_its_usage(
    store: SQLTurnStore, geppetto_sim: Simulator
) -> None:
    sim, bus = geppetto_sim, MemoryBus()
    runner = _runner(store, bus, sim)
    try:
        sim.background_pace = 0.03
        sim.queue(Reply(text=LONG))
        started = await runner.start("s1", "Tell me a story")
        await recorded(store, started.inference_id, 6)
        await runner.cancel("s1")
        async with asyncio.timeout(20):
            await runner._running["s1"].done.wait()
        [record] = await store.inferences("s1")
        assert record.status == "cancelled"
        cancels = [r.path for r in sim.requests if r.path.endswith("/cancel")]
        assert len(cancels) == 1 and cancels[0].startswith(f"{PATH}/")
        logged = [e.event for e in await store.load_events("s1", started.inference_id) if e.type == "log"]
        assert logged and logged[-1]["message"] == "background interaction cancelled"
        fields = logged[-1]["fields"]
        assert fields["status"] == "cancelled" and fields["response_id"] == cancels[0].split("/")[-2]
        usage = logged[-1]["metadata"]["usage"]
        assert usage["input_tokens"] > 0, "the usage of what it had produced"
    finally:
        await runner.close()
