"""``python -m geppetto.server --temporal HOST:PORT --task-queue Q`` (the entry without the ``cli`` extra) runs
the prompts as durable sessions, as ``geppetto serve --temporal`` does."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from geppetto.simulator import serve

from .served import events, served

pytest.importorskip("httpx")
pytest.importorskip("fastapi", reason="the server extra is not installed")
temporal = pytest.importorskip("geppetto.durable.temporal")
from temporalio.client import Client  # noqa: E402


def test_the_server_entry_takes_temporal(temporal_address: str, tmp_path: Path) -> None:
    sid = f"s-{uuid.uuid4()}"  # its own workflow on the shared dev server
    entry = ("geppetto.server",)
    with serve() as sim, served(temporal_address, sim.openai_url, tmp_path, entry=entry) as (client, queue, err):
        assert client.post("/api/sessions", json={"id": sid}).status_code == 201
        started = client.post(f"/api/sessions/{sid}/messages", json={"text": "What is the weather in Paris?"})
        assert started.status_code == 202, started.text
        finished = events(client, started.json()["events"])[-1]["data"]
    assert finished["status"] == "completed", (finished, err)

    async def described() -> tuple[str, int]:
        c = await Client.connect(temporal_address, data_converter=temporal.DATA_CONVERTER)
        handle = c.get_workflow_handle(temporal.workflow_id(sid))
        history = await handle.fetch_history()
        done = sum(1 for e in history.events if e.HasField("activity_task_completed_event_attributes"))
        return (await handle.describe()).task_queue, done

    task_queue, done = asyncio.run(described())
    assert task_queue == queue  # --task-queue was read
    assert done == 3  # two requests and the tool, as activities
