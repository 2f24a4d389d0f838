"""The executor: parallelism, call order, events, pending calls, and every failure as a tool_use error."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geppetto.events import EventMetadata, EventToolCallRequested, EventToolCallStarted, EventToolResult, with_sinks
from geppetto.events._types import Event
from geppetto.tools import ToolCallError, ToolRegistry, execute_tool_calls, pending_tool_calls, refuse_tool_calls, tool
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


async def test_events_started_only_when_a_tool_starts_and_a_result_for_every_call() -> None:
    seen: list[Event] = []
    meta = EventMetadata(session_id="S", inference_id="I", turn_id="T")
    calls = [
        Block.tool_call("c1", "add", {"a": 1}),
        Block.tool_call("c2", "x", {}),
        Block.tool_call("c3", "add", "{bad"),
        Block.tool_call("c4", "boom", {"x": 2}),
    ]
    with with_sinks(seen.append):
        await execute_tool_calls(ToolRegistry([add, boom]), calls, metadata=meta)
    # The engine publishes "requested"; the executor never repeats it.
    assert not any(isinstance(e, EventToolCallRequested) for e in seen)
    started = [e for e in seen if isinstance(e, EventToolCallStarted)]
    results = [e for e in seen if isinstance(e, EventToolResult)]
    assert started == [
        EventToolCallStarted(meta, call_id="c1", name="add"),
        EventToolCallStarted(meta, call_id="c4", name="boom"),
    ]
    bad_json = "arguments for add are not valid JSON (Expecting property name enclosed in double quotes at char 1)"
    assert sorted(results, key=lambda e: e.call_id) == [
        EventToolResult(meta, call_id="c1", name="add", result="2", error=None),
        EventToolResult(
            meta, call_id="c2", name="x", result=None, error="unknown tool 'x'; available tools: add, boom"
        ),
        EventToolResult(meta, call_id="c3", name="add", result=None, error=bad_json),
        EventToolResult(meta, call_id="c4", name="boom", result=None, error="tool boom raised ValueError: bad x 2"),
    ]
    # Each started event comes before its call's result.
    order = [(type(e).__name__, e.call_id) for e in seen if isinstance(e, EventToolCallStarted | EventToolResult)]
    for _, call_id in [x for x in order if x[0] == "EventToolCallStarted"]:
        assert order.index(("EventToolCallStarted", call_id)) < order.index(("EventToolResult", call_id))


async def test_refuse_tool_calls_answers_without_running_and_publishes_results() -> None:
    seen: list[Event] = []
    with with_sinks(seen.append):
        blocks = refuse_tool_calls([Block.tool_call("a", "add", {}), Block.tool_call("b", "zz", {})], "no tools")
    assert _payloads(blocks) == [
        {"id": "a", "result": "", "error": "no tools"},
        {"id": "b", "result": "", "error": "no tools"},
    ]
    assert [(type(e), e.call_id) for e in seen] == [(EventToolResult, "a"), (EventToolResult, "b")]  # type: ignore[attr-defined]


async def test_positional_only_parameters_are_passed_by_position() -> None:
    @tool
    def scale(x: int, /, factor: int = 2) -> int:
        """Scale x."""
        return x * factor

    @tool
    async def ascale(x: int, y: int = 10, /) -> int:
        """Add with defaults."""
        return x + y

    blocks = await execute_tool_calls(
        ToolRegistry([scale, ascale]),
        [
            Block.tool_call("a", "scale", {"x": 3}),
            Block.tool_call("b", "scale", {"x": 3, "factor": 5}),
            Block.tool_call("c", "ascale", {"x": 1}),
            Block.tool_call("d", "ascale", {"x": 1, "y": 2}),
        ],
    )
    assert _payloads(blocks) == [
        {"id": "a", "result": "6"},
        {"id": "b", "result": "15"},
        {"id": "c", "result": "11"},
        {"id": "d", "result": "3"},
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


def test_pending_tool_calls_match_positionally() -> None:
    turn = Turn()
    turn.append(Block.tool_call("call_0", "add", {"a": 1}))
    turn.append(Block.tool_use("call_0", "2"))
    reused = turn.append(Block.tool_call("call_0", "add", {"a": 5}))  # a later step reuses the id
    assert pending_tool_calls(turn) == [reused]

    turn = Turn()
    early = turn.append(Block.tool_use("x", "an answer before any call answers nothing"))
    first = turn.append(Block.tool_call("x", "add", {}))
    second = turn.append(Block.tool_call("x", "add", {}))
    assert early and pending_tool_calls(turn) == [first, second]
    turn.append(Block.tool_use("x", "1"))  # answers one call only, the earliest
    assert pending_tool_calls(turn) == [second]
    turn.append(Block.tool_use("x", "2"))
    assert pending_tool_calls(turn) == []

    turn = Turn()
    blank = turn.append(Block.tool_call("", "add", {}))
    turn.append(Block.tool_use("", "1"))
    blank2 = turn.append(Block.tool_call("", "add", {}))
    assert blank and pending_tool_calls(turn) == [blank2]


@settings(max_examples=60, deadline=None)
@given(raw=st.one_of(st.text(max_size=40), st.none(), st.integers(), st.lists(st.integers(), max_size=3)))
async def test_any_malformed_arguments_become_an_error_never_an_exception(raw: object) -> None:
    blocks = await execute_tool_calls(ToolRegistry([add]), [Block.tool_call("c", "add", raw)])
    assert len(blocks) == 1 and blocks[0].payload["id"] == "c"
    payload = blocks[0].payload
    assert ("error" in payload) != (payload["result"] != "")
