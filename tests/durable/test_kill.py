"""Workers SIGKILLed mid-run: another worker finishes the run, each tool ran once, the requests still chain."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from geppetto.simulator import serve

from .test_durable_session import record_history

temporal = pytest.importorskip("geppetto.durable.temporal")
from temporalio.client import Client  # noqa: E402

HERE = Path(__file__).parent
SRC = HERE.parent.parent / "src"
RECOVERY = 120.0  # the run completes within two minutes of the kill
STEP = 90.0  # any other wait
TIMEOUTS = temporal.Timeouts(heartbeat_s=10.0)


class Workers:
    """Worker processes on one task queue, for one simulator."""

    def __init__(self, address: str, queue: str, openai_url: str, runs: Path, env: dict[str, str]) -> None:
        self.args = [sys.executable, str(HERE / "_worker_main.py"), address, queue, openai_url, str(runs)]
        self.env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **env}
        self.procs: list[subprocess.Popen[bytes]] = []

    async def start(self) -> subprocess.Popen[bytes]:
        proc = await asyncio.to_thread(subprocess.Popen, self.args, env=self.env, stdout=subprocess.PIPE)
        self.procs.append(proc)
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), STEP)
        assert line.strip() == b"ready", line
        return proc

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


async def until(check: Callable[[], Any], what: str, bound: float = STEP) -> Any:
    deadline = time.monotonic() + bound
    while True:
        value = await check() if asyncio.iscoroutinefunction(check) else check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def posts(sim: Any) -> list[Any]:
    return [r for r in sim.requests if r.method == "POST" and r.path.endswith("/responses")]


@pytest.fixture
async def setup(temporal_address: str, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    env = getattr(request, "param", {})
    client = await Client.connect(temporal_address, data_converter=temporal.DATA_CONVERTER)
    runs = tmp_path / "runs.txt"
    runs.touch()
    with serve() as sim:
        workers = Workers(temporal_address, f"q-{uuid.uuid4()}", sim.openai_url, runs, env)
        try:
            yield client, sim, workers, runs
        finally:
            workers.stop_all()


async def finished(task: asyncio.Future[Any], client: Any, session_id: str) -> Any:
    """The prompt's Turn within RECOVERY seconds; else fail with what the workflow's history holds."""
    try:
        return await asyncio.wait_for(task, RECOVERY)
    except TimeoutError:
        history = await client.get_workflow_handle(temporal.workflow_id(session_id)).fetch_history()
        kinds = [e.WhichOneof("attributes") for e in history.events]
        raise AssertionError(f"the run did not finish in {RECOVERY:g} s; its history: {kinds}") from None


def ran(runs: Path) -> list[str]:
    return runs.read_text().splitlines()


async def test_killed_mid_request_second_worker_finishes(setup: Any) -> None:
    client, sim, workers, runs = setup
    first = await workers.start()
    s = temporal.DurableSession(client, task_queue=workers.args[3], engine="sim", timeouts=TIMEOUTS)
    await asyncio.wait_for(s.run("Hello"), STEP)
    sim.fail_next(slow_first_byte=300)  # the next request hangs in flight
    task = asyncio.ensure_future(s.run("What is the weather in Paris?"))
    await until(lambda: len(posts(sim)) == 2, "the slow request to reach the simulator")
    workers.kill(first)
    killed_at = time.monotonic()
    await workers.start()
    turn = await finished(task, client, s.session_id)
    assert time.monotonic() - killed_at < RECOVERY
    assert ran(runs) == ["get_weather Paris"]
    sent = posts(sim)
    assert len(sent) == 4  # Hello; the slow one; it again, from the same Turn; after the tool's result
    assert all(p.body.get("previous_response_id") for p in sent[1:]), [p.body.get("previous_response_id") for p in sent]
    assert sent[2].body["previous_response_id"] == sent[1].body["previous_response_id"]
    assert [b.kind.value for b in turn.blocks][-3:] == ["tool_call", "tool_use", "llm_text"]
    assert "Here is what the tools returned" in turn.blocks[-1].text


@pytest.mark.parametrize("setup", [{"GEPPETTO_TEST_TOOL_DELAY": "1.0"}], indirect=True)
async def test_killed_between_tool_result_and_next_request(setup: Any) -> None:
    client, sim, workers, runs = setup
    first = await workers.start()
    s = temporal.DurableSession(client, task_queue=workers.args[3], engine="sim", timeouts=TIMEOUTS)
    await asyncio.wait_for(s.run("Hello"), STEP)
    task = asyncio.ensure_future(s.run("What is the weather in Paris?"))
    await until(lambda: ran(runs), "the tool to run")
    # the request after the tool's result is held a while, so the kill lands before it is answered: on the
    # killed worker (then retried on the next one) or, when the kill came first, on the next worker
    sim.fail_next(slow_first_byte=20)
    handle = client.get_workflow_handle(temporal.workflow_id(s.session_id))

    async def tool_done() -> bool:
        history = await handle.fetch_history()
        return sum(1 for e in history.events if e.HasField("activity_task_completed_event_attributes")) >= 3

    await until(tool_done, "the tool's result in workflow history")
    workers.kill(first)
    await workers.start()
    turn = await finished(task, client, s.session_id)
    assert ran(runs) == ["get_weather Paris"]
    assert "Here is what the tools returned" in turn.blocks[-1].text
    assert all(p.body.get("previous_response_id") for p in posts(sim)[1:])


async def test_approval_answered_after_every_worker_stopped(setup: Any) -> None:
    client, sim, workers, runs = setup
    first = await workers.start()
    s = temporal.DurableSession(client, task_queue=workers.args[3], engine="sim", timeouts=TIMEOUTS)
    turn = await asyncio.wait_for(s.run("Reserve at Lucca"), STEP)
    pending = await s.pending_approvals()
    assert [(p.name, p.kind) for p in pending] == [("book_table", "approval")]
    assert [c.call_id for c in temporal_awaiting(turn)] == [pending[0].call_id]
    workers.kill(first)
    # nothing runs the session now; a new handle in this process answers it, a new worker goes on
    later = temporal.DurableSession(client, task_queue=workers.args[3], engine="sim", session_id=s.session_id)
    assert [p.call_id for p in await later.pending_approvals()] == [pending[0].call_id]
    assert ran(runs) == []
    await workers.start()
    out = await asyncio.wait_for(later.resume({pending[0].call_id: True}), RECOVERY)
    assert len(ran(runs)) == 1 and ran(runs)[0].startswith("book_table")
    assert await later.pending_approvals() == []
    assert "Here is what the tools returned" in out.blocks[-1].text
    await record_history(client, s.session_id, "approval")
    sent = posts(sim)
    assert len(sent) == 2  # the call, then the answer after the approved tool ran: chained on the first
    assert sent[0].body.get("previous_response_id") is None and sent[1].body.get("previous_response_id")
    assert sent[1].body["previous_response_id"] == turn.blocks[-1].metadata.get("geppetto.response_id@v1")


def temporal_awaiting(turn: Any) -> list[Any]:
    from geppetto.tools import awaiting

    return awaiting(turn)
