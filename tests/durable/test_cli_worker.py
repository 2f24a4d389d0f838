"""``geppetto worker``: a worker process from the command line runs a durable session's tool loop."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from geppetto.simulator import serve

temporal = pytest.importorskip("geppetto.durable.temporal")
from temporalio.client import Client  # noqa: E402

SRC = Path(__file__).parent.parent.parent / "src"
BOUND = 90.0


async def test_geppetto_worker_runs_a_durable_session(temporal_address: str) -> None:
    queue = f"q-{uuid.uuid4()}"
    client = await Client.connect(temporal_address, data_converter=temporal.DATA_CONVERTER)
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with serve() as sim:
        args = [sys.executable, "-m", "geppetto", "worker", "--temporal", temporal_address, "--task-queue", queue,
                "--profile", "sim", "--base-url", sim.openai_url, "--with-tools"]  # fmt: skip
        proc = await asyncio.to_thread(subprocess.Popen, args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert proc.stdout is not None
            line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), BOUND)
            assert line.startswith(b"geppetto worker on task queue"), line
            assert b"get_weather" in line
            s = temporal.DurableSession(client, task_queue=queue, engine="default")
            turn = await asyncio.wait_for(s.run("What is the weather in Lisbon?"), BOUND)
        finally:
            proc.send_signal(signal.SIGTERM)
            _out, err = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 0, err
    assert b"worker stopped" in err
    kinds = [b.kind.value for b in turn.blocks]
    assert kinds == ["user", "tool_call", "tool_use", "llm_text"]
    assert "Lisbon" in str(turn.blocks[2].payload.get("result"))
    sent = [r for r in sim.requests if r.method == "POST" and r.path.endswith("/responses")]
    assert len(sent) == 2 and sent[1].body.get("previous_response_id")


def test_geppetto_worker_without_temporal_says_what_to_pass() -> None:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = subprocess.run(
        [sys.executable, "-m", "geppetto", "worker"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2
    assert "--temporal" in out.stderr
