"""``geppetto serve --temporal`` with two workers: a prompt over REST runs as a durable session, its events
stream to the reader through the bus and its snapshot is in the store."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
temporal = pytest.importorskip("geppetto.durable.temporal")
pytest.importorskip("fastapi", reason="the server extra is not installed")
from temporalio.client import Client  # noqa: E402

from .served import BOUND, SRC, free_port, wait_listening  # noqa: E402
from .served import events as _events  # noqa: E402


@pytest.fixture
def redis_url() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed; two server workers need a shared bus")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_listening(port, "redis-server", proc, 20)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.kill()
        proc.wait(10)


def test_serve_temporal_two_workers(temporal_address: str, redis_url: str, tmp_path: Path) -> None:
    port, queue = free_port(), f"q-{uuid.uuid4()}"
    store = tmp_path / "sessions.db"
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "GEPPETTO_CONFIG_DIR": str(tmp_path), "GEPPETTO_DATA_DIR": str(tmp_path)}  # fmt: skip
    args = [sys.executable, "-m", "geppetto", "serve", "--profile", "sim", "--with-tools", "--workers", "2",
            "--bus", redis_url, "--store", str(store), "--port", str(port), "--sweep-interval", "0",
            "--temporal", temporal_address, "--task-queue", queue]  # fmt: skip
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_listening(port, "geppetto serve", proc, 90)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=BOUND) as client:
            deadline = time.monotonic() + 60
            while client.get("/api/sessions").status_code != 200:  # both workers up
                assert time.monotonic() < deadline
                time.sleep(0.2)
            assert client.post("/api/sessions", json={"id": "s1"}).status_code == 201
            started = client.post("/api/sessions/s1/messages", json={"text": "What is the weather in Paris?"})
            assert started.status_code == 202, started.text
            body = started.json()
            events = _events(client, body["events"], "run_finished")
            session = client.get("/api/sessions/s1").json()
    finally:
        proc.terminate()
        try:
            _out, err = proc.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            _out, err = proc.communicate()
    kinds = [e.get("event") for e in events]
    finished = events[-1]["data"]
    assert finished["status"] == "completed", (finished, err.decode(errors="replace")[-3000:])
    assert finished["inference_id"] == body["inference_id"]
    assert "tool_call" in kinds and "tool_result" in kinds and "text_delta" in kinds, kinds
    assert all(e["data"].get("inference_id") == body["inference_id"] for e in events if isinstance(e["data"], dict))
    latest = session["latest"]
    assert [b["kind"] for b in latest["blocks"]] == ["user", "tool_call", "tool_use", "llm_text"]
    assert "Paris" in str(latest["blocks"][2]["payload"].get("result"))
    assert session["inferences"][-1]["status"] == "completed"

    async def workflow_ran() -> int:
        c = await Client.connect(temporal_address, data_converter=temporal.DATA_CONVERTER)
        history = await c.get_workflow_handle(temporal.workflow_id("s1")).fetch_history()
        return sum(1 for e in history.events if e.HasField("activity_task_completed_event_attributes"))

    assert asyncio.run(workflow_ran()) == 3  # two requests and the tool, as activities
