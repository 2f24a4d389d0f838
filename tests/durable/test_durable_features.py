"""What a Session does works inside a DurableSession: structured output, attachments, usage totals, and the
errors that name the fix (a prompt while a call waits, a decision for a call that does not wait)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import serve

temporal = pytest.importorskip("geppetto.durable.temporal")
from temporalio.client import Client  # noqa: E402

BOUND = 120.0


class City(BaseModel):
    name: str
    population: int


@gp.tool(requires_approval=True)
def book_table(restaurant: str) -> str:
    """Reserve at a restaurant."""
    return f"booked at {restaurant}"


@pytest.fixture
async def durable(temporal_address: str) -> AsyncIterator[tuple[Any, Any]]:
    client = await Client.connect(temporal_address, data_converter=temporal.DATA_CONVERTER)
    queue = f"q-{uuid.uuid4()}"
    with serve() as sim:
        engines = {"sim": lambda: ResponsesEngine("sim-1", api_key="sk-sim", base_url=sim.openai_url)}
        async with temporal.worker(client, task_queue=queue, engines=engines, tools=[book_table]):
            yield temporal.DurableSession(client, task_queue=queue, engine="sim"), sim


async def test_structured_output_attachments_and_usage(durable: tuple[Any, Any], tmp_path: Path) -> None:
    s, sim = durable
    notes = tmp_path / "notes.txt"
    notes.write_text("Lisbon has about 545,000 people.")
    turn = await asyncio.wait_for(s.run("Describe Lisbon.", output=City), BOUND)
    city = gp.output_of(turn, City)
    assert isinstance(city, City)
    assert sim.requests[-1].body["text"]["format"]["type"] == "json_schema"
    turn = await asyncio.wait_for(s.run("Summarize the notes.", files=[notes]), BOUND)
    user = [b for b in turn.blocks if b.kind.value == "user"][-1]
    (attached,) = user.payload["files"]  # read by the client, sent inline to the worker
    assert attached["media_type"] == "text/plain" and attached["filename"] == "notes.txt"
    assert "TGlzYm9uIGhhcyBhYm91dCA1NDUsMDAw" in str(sim.requests[-1].body["input"])  # base64 of the text
    totals = turn.metadata.get("geppetto.session_usage@v1")
    assert totals is not None and totals["requests"] == 2  # carried from one request activity to the next


async def test_errors_name_the_fix(durable: tuple[Any, Any]) -> None:
    s, _sim = durable
    await asyncio.wait_for(s.run("Reserve at Lucca"), BOUND)
    (call,) = await s.pending_approvals()
    with pytest.raises(gp.UsageError, match="waiting for a decision") as refused:
        await asyncio.wait_for(s.run("Hello"), BOUND)
    assert "resume" in str(refused.value)
    with pytest.raises(gp.UsageError, match="no tool call 'nope' waits"):
        await asyncio.wait_for(s.resume({"nope": True}), BOUND)
    turn = await asyncio.wait_for(s.resume({call.call_id: "not tonight"}), BOUND)
    (answer,) = [b for b in turn.blocks if b.kind.value == "tool_use"]
    assert answer.payload.get("error") == "the user denied this tool call: not tonight"
    assert await s.pending_approvals() == []
