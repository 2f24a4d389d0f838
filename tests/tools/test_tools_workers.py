"""Worker threads for sync tools: reused between calls, never starved by hung tools, idle ones exit."""

from __future__ import annotations

import asyncio
import threading

from geppetto.tools import ToolRegistry, execute_tool_calls, tool
from geppetto.tools._workers import WORKERS, Workers
from geppetto.turns import Block


async def test_sequential_sync_calls_reuse_idle_worker_threads() -> None:
    @tool
    def where() -> str:
        """Names its thread."""
        return threading.current_thread().name

    registry = ToolRegistry([where])
    await execute_tool_calls(registry, [Block.tool_call("warm", "where", {})])
    before = WORKERS.started
    for i in range(5):
        blocks = await execute_tool_calls(registry, [Block.tool_call(f"c{i}", "where", {})])
        assert blocks[0].payload["result"] == "geppetto-tool-where"
    assert WORKERS.started == before  # every call after the first found an idle worker


async def test_hung_tools_do_not_starve_later_sync_calls() -> None:
    release = threading.Event()

    @tool
    def hang() -> str:
        """Blocks its thread until released."""
        release.wait(30)
        return "late"

    @tool
    def quick(n: int) -> int:
        """Answers at once."""
        return n

    registry = ToolRegistry([hang, quick])
    try:
        hung = [Block.tool_call(f"h{i}", "hang", {}) for i in range(8)]
        await execute_tool_calls(registry, hung, timeout_s=0.05, max_parallel=8)
        # Eight abandoned threads are still blocked; new calls still run, well inside their timeout.
        calls = [Block.tool_call(f"q{i}", "quick", {"n": i}) for i in range(4)]
        async with asyncio.timeout(10):
            blocks = await execute_tool_calls(registry, calls, timeout_s=5, max_parallel=4)
        assert [b.payload for b in blocks] == [{"id": f"q{i}", "result": str(i)} for i in range(4)]
    finally:
        release.set()


def test_idle_workers_exit_and_new_work_still_runs() -> None:
    workers = Workers(idle_s=0.01)
    done = [threading.Event() for _ in range(3)]
    workers.submit(done[0].set, name="idle-test")
    assert done[0].wait(10)
    # Whether the first worker is still idle or has exited, the next job runs.
    for event in done[1:]:
        workers.submit(event.set, name="idle-test")
        assert event.wait(10)
    threads = [t for t in threading.enumerate() if t.name == "idle-test"]
    for t in threads:
        t.join(10)
        assert not t.is_alive()


def test_parallel_jobs_each_get_a_thread_when_none_is_idle() -> None:
    workers = Workers(idle_s=5)
    gate = threading.Barrier(4, timeout=10)
    finished = threading.Event()
    count = 0
    lock = threading.Lock()

    def job() -> None:
        nonlocal count
        gate.wait()  # all four must run at once, so none may queue behind another
        with lock:
            count += 1
            if count == 4:
                finished.set()

    for _ in range(4):
        workers.submit(job)
    assert finished.wait(10)
    assert workers.started == 4
