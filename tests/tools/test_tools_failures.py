"""What tools raise, how timeouts are enforced and told apart from a tool's own, and retry with backoff."""

from __future__ import annotations

import asyncio
import threading

import pytest

from geppetto.tools import ToolRegistry, execute_tool_calls, tool
from geppetto.tools import _executor as executor
from geppetto.turns import Block


async def _run_one(t: object, timeout_s: float = 30.0, **args: object) -> dict[str, object]:
    """Run one call of tool ``t`` and return its tool_use payload; a hang fails the test, not the run."""
    registry = ToolRegistry([t])  # type: ignore[list-item]
    name = registry.names()[0]
    async with asyncio.timeout(10):
        blocks = await execute_tool_calls(registry, [Block.tool_call("c", name, args)], timeout_s=timeout_s)
    return blocks[0].payload


@pytest.fixture
def backoffs(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backoff delays the executor asks for, recorded instead of slept."""
    delays: list[float] = []

    async def record(delay: float) -> None:
        delays.append(delay)

    monkeypatch.setattr(executor, "_sleep", record)
    return delays


async def test_a_tools_own_timeout_error_is_its_exception_not_our_timeout() -> None:
    @tool
    def net() -> str:
        """Fails like a network client."""
        raise TimeoutError("connect to example.invalid timed out")

    @tool
    async def anet() -> str:
        """Times out on its own, well inside our limit."""
        await asyncio.wait_for(asyncio.sleep(10), 0.001)
        return ""

    assert await _run_one(net, timeout_s=1) == {
        "id": "c",
        "result": "",
        "error": "tool net raised TimeoutError: connect to example.invalid timed out",
    }
    assert await _run_one(anet, timeout_s=30) == {"id": "c", "result": "", "error": "tool anet raised TimeoutError"}


async def test_a_tools_own_timeout_error_is_retried_as_an_exception(backoffs: list[float]) -> None:
    @tool(retryable=True, max_retries=1, backoff_s=0.25)
    def net() -> str:
        """Always times out on its own."""
        raise TimeoutError("read timed out")

    payload = await _run_one(net, timeout_s=5)
    assert payload["error"] == "tool net raised TimeoutError: read timed out (after 2 attempts)"
    assert backoffs == [0.25]


async def test_stop_iteration_in_a_sync_tool_is_reported_at_once() -> None:
    @tool
    def first(items: list[int]) -> int:
        """The first item."""
        return next(iter(items))

    assert await _run_one(first, timeout_s=5, items=[]) == {
        "id": "c",
        "result": "",
        "error": "tool first raised StopIteration",
    }


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt(), GeneratorExit()])
async def test_base_exceptions_in_a_sync_tools_thread_are_its_failure(exc: BaseException) -> None:
    @tool
    def quits() -> str:
        """Raises a BaseException in its worker thread."""
        raise exc

    payload = await _run_one(quits, timeout_s=5)
    detail = f": {exc}" if str(exc) else ""
    assert payload == {"id": "c", "result": "", "error": f"tool quits raised {type(exc).__name__}{detail}"}


async def test_async_tool_is_cancelled_at_its_timeout() -> None:
    cancelled = asyncio.Event()

    @tool
    async def hang() -> str:
        """Never returns."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    loop = asyncio.get_running_loop()
    start = loop.time()
    payload = await _run_one(hang, timeout_s=1)
    elapsed = loop.time() - start
    assert payload == {"id": "c", "result": "", "error": "tool hang timed out after 1s"}
    assert cancelled.is_set()
    # Not early, and enforced: the tool's own 30 s never ran out. (A tight upper bound such as 2x the limit
    # measures the machine's load, not the executor; it failed on a busy CI machine.)
    assert 0.9 <= elapsed < 25


async def test_sync_tool_result_is_abandoned_at_its_timeout() -> None:
    release = threading.Event()
    finished = threading.Event()

    @tool
    def block_thread() -> str:
        """Blocks a worker thread."""
        release.wait(30)
        finished.set()
        return "late"

    loop = asyncio.get_running_loop()
    start = loop.time()
    payload = await _run_one(block_thread, timeout_s=1)
    elapsed = loop.time() - start
    assert payload == {"id": "c", "result": "", "error": "tool block_thread timed out after 1s"}
    assert 0.9 <= elapsed < 25  # not early; enforced before the tool's own 30 s wait ended
    assert not finished.is_set()
    release.set()
    assert await asyncio.to_thread(finished.wait, 10)


async def test_per_tool_timeout_overrides_the_executor_default() -> None:
    @tool(timeout_s=0.05)
    async def quick_limit() -> str:
        """Times out fast."""
        await asyncio.sleep(5)
        return ""

    payload = await _run_one(quick_limit, timeout_s=30)
    assert payload["error"] == "tool quick_limit timed out after 0.05s"


async def test_backoff_doubles_from_backoff_s_between_attempts(backoffs: list[float]) -> None:
    attempts = 0

    @tool(retryable=True, max_retries=3, backoff_s=0.5)
    def flaky() -> str:
        """Works on the fourth attempt."""
        nonlocal attempts
        attempts += 1
        if attempts < 4:
            raise ConnectionError("try again")
        return "ok"

    assert await _run_one(flaky) == {"id": "c", "result": "ok"}
    assert attempts == 4
    assert backoffs == [0.5, 1.0, 2.0]


async def test_retry_only_for_retryable_tools_or_the_retry_policy(backoffs: list[float]) -> None:
    attempts: dict[str, int] = {"flaky": 0, "plain": 0}

    @tool(retryable=True, max_retries=2, backoff_s=0.001)
    def flaky() -> str:
        """Works on the third attempt."""
        attempts["flaky"] += 1
        if attempts["flaky"] < 3:
            raise ConnectionError("try again")
        return "ok"

    @tool(backoff_s=0.001)
    def plain() -> str:
        """Always fails."""
        attempts["plain"] += 1
        raise ConnectionError("down")

    reg = ToolRegistry([flaky, plain])
    blocks = await execute_tool_calls(reg, [Block.tool_call("a", "flaky", {}), Block.tool_call("b", "plain", {})])
    assert [b.payload for b in blocks] == [
        {"id": "a", "result": "ok"},
        {"id": "b", "result": "", "error": "tool plain raised ConnectionError: down"},
    ]
    assert attempts == {"flaky": 3, "plain": 1}

    blocks = await execute_tool_calls(reg, [Block.tool_call("b", "plain", {})], on_error="retry")
    msg = "tool plain raised ConnectionError: down (after 3 attempts)"
    assert [b.payload for b in blocks] == [{"id": "b", "result": "", "error": msg}]
    assert attempts["plain"] == 4
    assert backoffs == [0.001, 0.002, 0.001, 0.002]


async def test_a_timed_out_async_tool_is_retried(backoffs: list[float]) -> None:
    attempts = 0

    @tool(retryable=True, max_retries=2, backoff_s=1.0, timeout_s=0.05)
    async def slow_then_fast() -> str:
        """Hangs on the first attempt only."""
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            await asyncio.sleep(30)
        return "ok"

    assert await _run_one(slow_then_fast) == {"id": "c", "result": "ok"}
    assert (attempts, backoffs) == (2, [1.0])


async def test_a_timed_out_sync_tool_is_not_retried_while_its_thread_may_still_run(backoffs: list[float]) -> None:
    release = threading.Event()
    running = 0
    peak = 0
    lock = threading.Lock()

    @tool(retryable=True, max_retries=2, backoff_s=1.0, timeout_s=0.05)
    def stuck() -> str:
        """Blocks its thread until released."""
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        release.wait(30)
        with lock:
            running -= 1
        return "late"

    payload = await _run_one(stuck)
    release.set()
    assert payload == {"id": "c", "result": "", "error": "tool stuck timed out after 0.05s"}
    assert (peak, backoffs) == (1, [])
