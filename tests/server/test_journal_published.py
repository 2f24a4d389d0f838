"""A tool result's event across a worker handoff, in one process (two runners on one store and one bus): a
reader subscribed through the handoff gets the ``tool_result`` once, whether the worker that stopped had
published it and marked it (``pub:<call id>`` in the journal), published it and stopped before the mark, or
journaled the result and stopped before publishing it; the tool runs once in each case."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import geppetto as gp
from geppetto.events.bus import EventBus, MemoryBus
from geppetto.server._runner import RUN_FINISHED, Runner
from geppetto.session.stores import SQLTurnStore, open_store
from geppetto.simulator import Reply, Simulator, ToolCall

CALL = "call_paris"


class _HeldAfterFirst:
    """``engine``, whose requests after its first wait forever (the worker stops before the next request)."""

    def __init__(self, engine: Any) -> None:
        self.engine, self.provider, self.requests = engine, engine.provider, 0

    async def run_inference(self, turn: gp.Turn) -> gp.Turn:
        self.requests += 1
        if self.requests > 1:
            await asyncio.Event().wait()
        return await self.engine.run_inference(turn)  # type: ignore[no-any-return]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLTurnStore]:
    the_store = open_store(tmp_path / "store.db")
    await the_store.create_session("s1", {})
    try:
        yield the_store
    finally:
        the_store.close()


async def _read(bus: EventBus, out: list[dict[str, Any]]) -> None:
    async for event in bus.subscribe("s1"):
        out.append(event.data)
        if event.data.get("type") == RUN_FINISHED:
            return


async def _journaled(store: SQLTurnStore, entry: str) -> None:
    entries: list[str] = []
    async with asyncio.timeout(20):
        while entry not in entries:
            await asyncio.sleep(0.02)
            entries = [r.entry for r in await store.journal_read("s1")]


@pytest.mark.parametrize("stopped", ["after_the_mark", "before_the_mark", "before_publishing"])
async def test_a_tool_result_reaches_a_reader_once_across_a_handoff(
    stopped: str, store: SQLTurnStore, geppetto_sim: Simulator
) -> None:
    runs: list[str] = []

    @gp.tool
    def weather(city: str) -> str:
        """The weather in a city."""
        runs.append(city)
        return f"sunny in {city}"

    tools = gp.ToolRegistry([weather])
    bus = MemoryBus()
    first = Runner(store, bus, lambda s: _HeldAfterFirst(geppetto_sim.engine()), tools, sweep_interval=0)
    second = Runner(store, bus, lambda s: geppetto_sim.engine(poll_interval=0.05), tools, sweep_interval=0)
    if stopped != "after_the_mark":  # the worker dies as the bus takes the event, or just before
        publish, dead = first.publisher.publish, [False]

        async def dying(topic: str, data: dict[str, Any], *, key: str | None = None) -> str | None:
            if dead[0]:
                return None  # nothing more reaches the bus from it (and nothing is marked)
            if data.get("type") == "tool_result":
                dead[0] = True
                if stopped == "before_the_mark":
                    await publish(topic, data, key=key)
                return None
            return await publish(topic, data, key=key)

        first.publisher.publish = dying  # type: ignore[method-assign]
    events: list[dict[str, Any]] = []
    reader = asyncio.get_running_loop().create_task(_read(bus, events))
    try:
        geppetto_sim.queue(
            Reply(tool_calls=[ToolCall("weather", {"city": "Paris"}, call_id=CALL)]), Reply(text="It is sunny.")
        )
        await first.start("s1", "Weather in Paris?")
        await _journaled(store, f"call:{CALL}")
        if stopped == "after_the_mark":
            await _journaled(store, f"pub:{CALL}")
        await asyncio.sleep(0.1)  # the pump has published what it was given
        await first.close(grace=0)  # left running: its step's response is recorded
        await second.sweep()
        await second.sweep()
        async with asyncio.timeout(20):
            await reader
    finally:
        reader.cancel()
        await second.close()
    assert runs == ["Paris"], "the tool ran once"
    results = [e for e in events if e.get("type") == "tool_result"]
    assert [(e["call_id"], e["result"]) for e in results] == [(CALL, "sunny in Paris")], "delivered once"
    assert events[-1]["status"] == "completed"
    posts = [r for r in geppetto_sim.requests if r.method == "POST" and r.path == "/v1/responses"]
    assert len(posts) == 2
