"""``POST /api/sessions/{id}/cancel`` under ``geppetto serve --temporal``: the running prompt's activity is
cancelled through Temporal, the run ends as cancelled, and the session goes on from the Turn it started from."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from geppetto.simulator import serve

from .served import events, served

pytest.importorskip("httpx")
pytest.importorskip("fastapi", reason="the server extra is not installed")
temporal = pytest.importorskip("geppetto.durable.temporal")
from temporalio.client import Client  # noqa: E402

STOPPED = 60.0  # the cancel reaches the activity at its next heartbeat (every 5 s by default)


def _posts(sim: object) -> int:
    return sum(1 for r in sim.requests if r.method == "POST" and r.path.endswith("/responses"))  # type: ignore[attr-defined]


def test_cancel_stops_the_workflows_activity(temporal_address: str, tmp_path: Path) -> None:
    sid = f"s-{uuid.uuid4()}"  # its own workflow on the shared dev server
    with serve() as sim, served(temporal_address, sim.openai_url, tmp_path) as (client, _queue, err):
        assert client.post("/api/sessions", json={"id": sid}).status_code == 201
        first = client.post(f"/api/sessions/{sid}/messages", json={"text": "Hello"}).json()
        assert events(client, first["events"])[-1]["data"]["status"] == "completed"
        sim.fail_next(slow_first_byte=300)  # the next request hangs in flight
        started = client.post(f"/api/sessions/{sid}/messages", json={"text": "What is the weather in Paris?"})
        assert started.status_code == 202, started.text
        body = started.json()
        deadline = time.monotonic() + 60
        while _posts(sim) < 2:
            assert time.monotonic() < deadline, "the slow request did not reach the simulator"
            time.sleep(0.05)
        cancelled = client.post(f"/api/sessions/{sid}/cancel")
        assert cancelled.status_code == 202 and cancelled.json()["inference_id"] == body["inference_id"]
        asked = time.monotonic()
        finished = events(client, body["events"])[-1]["data"]
        took = time.monotonic() - asked
        session = client.get(f"/api/sessions/{sid}").json()
        again = client.post(f"/api/sessions/{sid}/messages", json={"text": "Thanks"})
        assert again.status_code == 202, again.text
        last = events(client, again.json()["events"])[-1]["data"]
    assert finished["status"] == "cancelled", (finished, err)
    assert finished["error"] == "cancelled by a request"
    assert took < STOPPED
    assert session["inferences"][-1]["status"] == "cancelled"
    assert [b["kind"] for b in session["latest"]["blocks"]] == ["user", "llm_text"]  # the Turn it started from
    assert last["status"] == "completed", last
    assert sim.requests[-1].body.get("previous_response_id")  # the next prompt still chains

    async def history_kinds() -> list[str]:
        c = await Client.connect(temporal_address, data_converter=temporal.DATA_CONVERTER)
        history = await c.get_workflow_handle(temporal.workflow_id(sid)).fetch_history()
        return [str(e.WhichOneof("attributes")) for e in history.events]

    kinds = asyncio.run(history_kinds())
    assert "activity_task_cancel_requested_event_attributes" in kinds
    assert "activity_task_canceled_event_attributes" in kinds  # the activity itself stopped, not abandoned
