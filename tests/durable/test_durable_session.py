"""A chained tool loop through DurableSession on the simulator, against a real Temporal dev server."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

import pytest

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import serve

temporal = pytest.importorskip("geppetto.durable.temporal")
from temporalio.client import Client  # noqa: E402

BOUND = 120.0
HISTORIES = Path(__file__).parent.parent / "fixtures" / "durable"

RUNS: list[str] = []


@gp.tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    RUNS.append(city)
    return f"{city}: 18°C, light rain"


@gp.tool(requires_approval=True)
def book_table(restaurant: str) -> str:
    """Book a table at a restaurant."""
    RUNS.append(restaurant)
    return f"booked at {restaurant}"


async def test_chained_tool_loop(temporal_address: str) -> None:
    RUNS.clear()
    client = await Client.connect(temporal_address, data_converter=temporal.DATA_CONVERTER)
    queue = f"q-{uuid.uuid4()}"
    with serve() as sim:
        engines = {"sim": lambda: ResponsesEngine("sim-1", api_key="sk-sim", base_url=sim.openai_url)}
        async with temporal.worker(client, task_queue=queue, engines=engines, tools=[get_weather]):
            s = temporal.DurableSession(client, task_queue=queue, engine="sim", system="Be terse.")
            first = await asyncio.wait_for(s.run("Hello"), BOUND)
            turn = await asyncio.wait_for(s.run("What is the weather in Paris?"), BOUND)
            latest = await s.latest()
            await record_history(client, s.session_id, "chained_tool_loop")
        posts = [r for r in sim.requests if r.method == "POST" and r.path.endswith("/responses")]
    assert [b.kind.value for b in first.blocks] == ["system", "user", "llm_text"]
    kinds = [b.kind.value for b in turn.blocks]
    assert kinds[:3] == ["system", "user", "llm_text"]
    assert kinds[3:] == ["user", "tool_call", "tool_use", "llm_text"]
    assert "18°C" in (turn.blocks[-2].payload.get("result") or "")
    assert "Here is what the tools returned" in turn.blocks[-1].text
    assert RUNS == ["Paris"]
    assert len(posts) == 3
    assert posts[0].body.get("previous_response_id") is None
    assert all(p.body.get("previous_response_id") for p in posts[1:]), [p.body for p in posts]
    assert latest is not None and latest.id == turn.id and len(latest.blocks) == len(turn.blocks)


async def record_history(client: Client, session_id: str, name: str) -> None:
    """With GEPPETTO_RECORD_HISTORY=1, save the session's workflow history for the replay test."""
    if os.environ.get("GEPPETTO_RECORD_HISTORY") != "1":
        return
    history = await client.get_workflow_handle(temporal.workflow_id(session_id)).fetch_history()
    HISTORIES.mkdir(parents=True, exist_ok=True)
    (HISTORIES / f"{name}.json").write_text(history.to_json())


def test_import_geppetto_does_not_import_temporalio() -> None:
    import subprocess

    code = (
        "import sys, geppetto, geppetto.durable, geppetto.server, geppetto.cli._app; print('temporalio' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
