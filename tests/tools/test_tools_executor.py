"""The executor: parallelism, call order, timeouts, retries, and every failure as a tool_use error."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geppetto.events import EventMetadata, EventToolCallStarted, EventToolResult, with_sinks
from geppetto.events._types import Event
from geppetto.tools import ToolCallError, ToolRegistry, execute_tool_calls, pending_tool_calls, tool
from geppetto.turns import Block, BlockKind, Turn


def _payloads(blocks: list[Block]) -> list[dict[str, object]]:
    assert all(b.kind is BlockKind.TOOL_USE for b in blocks)
    return [b.payload for b in blocks]


def add(a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


async def shout(text: str) -> str:
    """Upper-case text."""
    await asyncio.sleep(0)
    return text.upper()


def boom(x: int) -> int:
    """Always fails."""
    raise ValueError(f"bad x {x}")


async def test_sync_and_async_tools_and_every_error_path_become_tool_use_blocks() -> None:
    reg = ToolRegistry([add, shout, boom])
    calls = [
        Block.tool_call("c1", "add", {"a": 2}),
        Block.tool_call("c2", "shout", '{"text": "hi"}'),
        Block.tool_call("c3", "nope", {}),
        Block.tool_call("c4", "add", '{"a": 1,'),
        Block.tool_call("c5", "add", {"a": "not a number"}),
        Block.tool_call("c6", "boom", {"x": 7}),
        Block.tool_call("c7", "add", "[1, 2]"),
        Block.tool_call("c8", "add", {"a": 1, "extra": True}),
    ]
    blocks = await execute_tool_calls(reg, calls)
    errors = {
        "c3": "unknown tool 'nope'; available tools: add, shout, boom",
        "c4": "arguments for add are not valid JSON (Expecting property name enclosed in double quotes at char 8)",
        "c5": "invalid arguments for add: a: Input should be a valid integer, unable to parse string as an integer",
        "c6": "tool boom raised ValueError: bad x 7",
        "c7": "arguments for add must be a JSON object, got list",
        "c8": "invalid arguments for add: extra: Extra inputs are not permitted",
    }
    assert _payloads(blocks) == [
        {"id": "c1", "result": "3"},
        {"id": "c2", "result": "HI"},
        *({"id": cid, "result": "", "error": msg} for cid, msg in errors.items()),
    ]


async def test_callable_objects_sync_and_async() -> None:
    class Greeter:
        async def __call__(self, name: str) -> str:
            return f"hello {name}"

    class Doubler:
        def __call__(self, n: int) -> int:
            return 2 * n

    reg = ToolRegistry([tool(name="greet")(Greeter()), tool(name="double")(Doubler())])
    blocks = await execute_tool_calls(
        reg, [Block.tool_call("a", "greet", {"name": "Ada"}), Block.tool_call("b", "double", {"n": 4})]
    )
    assert _payloads(blocks) == [{"id": "a", "result": "hello Ada"}, {"id": "b", "result": "8"}]


async def test_parallel_execution_keeps_call_order_and_respects_max_parallel() -> None:
    running = 0
    peak = 0

    @tool
    async def slow(n: int, delay: float) -> int:
        """Sleep then echo."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(delay)
        running -= 1
        return n

    reg = ToolRegistry([slow])
    # Later calls finish first; results must still come back in call order.
    calls = [Block.tool_call(f"c{i}", "slow", {"n": i, "delay": 0.05 * (6 - i)}) for i in range(6)]
    blocks = await execute_tool_calls(reg, calls, max_parallel=3)
    assert _payloads(blocks) == [{"id": f"c{i}", "result": str(i)} for i in range(6)]
    assert peak == 3


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

    start = time.monotonic()
    blocks = await execute_tool_calls(ToolRegistry([hang]), [Block.tool_call("c1", "hang", {})], timeout_s=0.2)
    elapsed = time.monotonic() - start
    assert _payloads(blocks) == [{"id": "c1", "result": "", "error": "tool hang timed out after 0.2s"}]
    assert cancelled.is_set()
    assert elapsed < 0.4  # the issue demands enforcement within 2x the limit


async def test_sync_tool_result_is_abandoned_at_its_timeout() -> None:
    release = threading.Event()
    finished = threading.Event()

    @tool
    def block_thread() -> str:
        """Blocks a worker thread."""
        release.wait(10)
        finished.set()
        return "late"

    start = time.monotonic()
    blocks = await execute_tool_calls(
        ToolRegistry([block_thread]), [Block.tool_call("c1", "block_thread", {})], timeout_s=0.2
    )
    elapsed = time.monotonic() - start
    assert _payloads(blocks) == [
        {
            "id": "c1",
            "result": "",
            "error": "tool block_thread timed out after 0.2s",
        }
    ]
    assert elapsed < 0.4
    assert not finished.is_set()
    release.set()
    assert await asyncio.to_thread(finished.wait, 5)


async def test_per_tool_timeout_overrides_the_executor_default() -> None:
    @tool(timeout_s=0.05)
    async def quick_limit() -> str:
        """Times out fast."""
        await asyncio.sleep(5)
        return ""

    blocks = await execute_tool_calls(
        ToolRegistry([quick_limit]), [Block.tool_call("c", "quick_limit", {})], timeout_s=30
    )
    assert blocks[0].payload["error"] == "tool quick_limit timed out after 0.05s"


async def test_retry_only_for_retryable_tools_or_the_retry_policy() -> None:
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
    assert _payloads(blocks) == [
        {"id": "a", "result": "ok"},
        {
            "id": "b",
            "result": "",
            "error": "tool plain raised ConnectionError: down",
        },
    ]
    assert attempts == {"flaky": 3, "plain": 1}

    blocks = await execute_tool_calls(reg, [Block.tool_call("b", "plain", {})], on_error="retry")
    msg = "tool plain raised ConnectionError: down (after 3 attempts)"
    assert _payloads(blocks) == [{"id": "b", "result": "", "error": msg}]
    assert attempts["plain"] == 4


async def test_validation_errors_are_not_retried() -> None:
    calls = 0

    @tool(retryable=True, backoff_s=0.001)
    def strict(n: int) -> int:
        """Counts calls."""
        nonlocal calls
        calls += 1
        return n

    blocks = await execute_tool_calls(ToolRegistry([strict]), [Block.tool_call("c", "strict", {"n": "x"})])
    assert "invalid arguments for strict" in blocks[0].payload["error"]
    assert calls == 0


async def test_on_error_raise() -> None:
    with pytest.raises(ToolCallError, match="tool call c failed: tool boom raised ValueError: bad x 1") as info:
        await execute_tool_calls(ToolRegistry([boom]), [Block.tool_call("c", "boom", {"x": 1})], on_error="raise")
    assert info.value.block.payload["id"] == "c"


async def test_events_started_and_result_carry_the_metadata() -> None:
    seen: list[Event] = []
    meta = EventMetadata(session_id="S", inference_id="I", turn_id="T")
    with with_sinks(seen.append):
        await execute_tool_calls(
            ToolRegistry([add]), [Block.tool_call("c1", "add", {"a": 1}), Block.tool_call("c2", "x", {})], metadata=meta
        )
    started = [e for e in seen if isinstance(e, EventToolCallStarted)]
    results = [e for e in seen if isinstance(e, EventToolResult)]
    assert started == [
        EventToolCallStarted(meta, call_id="c1", name="add"),
        EventToolCallStarted(meta, call_id="c2", name="x"),
    ]
    assert sorted(results, key=lambda e: e.call_id) == [
        EventToolResult(meta, call_id="c1", name="add", result="2", error=None),
        EventToolResult(meta, call_id="c2", name="x", result=None, error="unknown tool 'x'; available tools: add"),
    ]


def test_pending_tool_calls_ignores_answered_calls() -> None:
    turn = Turn()
    c1 = turn.append(Block.tool_call("c1", "add", {"a": 1}))
    turn.append(Block.tool_use("c1", "2"))
    c2 = turn.append(Block.tool_call("c2", "add", '{"a": 2}'))
    c3 = turn.append(Block.tool_call("c3", "add", {}))
    turn.append(Block.tool_use("c3", "x"))
    assert pending_tool_calls(turn) == [c2]
    assert c1 not in pending_tool_calls(turn) and c3 not in pending_tool_calls(turn)


@settings(max_examples=60, deadline=None)
@given(raw=st.one_of(st.text(max_size=40), st.none(), st.integers(), st.lists(st.integers(), max_size=3)))
async def test_any_malformed_arguments_become_an_error_never_an_exception(raw: object) -> None:
    blocks = await execute_tool_calls(ToolRegistry([add]), [Block.tool_call("c", "add", raw)])
    assert len(blocks) == 1 and blocks[0].payload["id"] == "c"
    payload = blocks[0].payload
    assert ("error" in payload) != (payload["result"] != "")
