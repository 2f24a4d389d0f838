"""tool_loop: pending calls, call-order results, re-inference, tool config, max-iterations semantics."""

from __future__ import annotations

import pytest

import geppetto as gp
from geppetto.middleware import tool_loop, with_middleware
from geppetto.testing import FunctionEngine, ScriptedEngine
from geppetto.tools import TOOL_CONFIG, ToolConfig, ToolDefinition, ToolRegistry, current_tools
from geppetto.turns import Block, BlockKind, Turn


def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def add(a: int, b: int) -> int:
    """Add."""
    return a + b


def _shape(turn: Turn) -> list[tuple[str, dict[str, object]]]:
    return [(b.kind.value, b.payload) for b in turn.blocks]


def _seed(text: str = "hi") -> Turn:
    turn = Turn()
    turn.append(Block.user(text))
    return turn


async def test_no_tool_calls_returns_after_one_inference() -> None:
    engine = ScriptedEngine([Block.llm_text("hello")])
    out = await with_middleware(engine, tool_loop(ToolRegistry([add]))).run_inference(_seed())
    assert _shape(out) == [("user", {"text": "hi"}), ("llm_text", {"text": "hello"})]
    assert engine.remaining == 0 and len(engine.turns) == 1


async def test_calls_are_executed_appended_in_call_order_and_the_model_runs_again() -> None:
    engine = ScriptedEngine(
        [
            [Block.tool_call("c1", "get_weather", {"city": "Paris"}), Block.tool_call("c2", "add", '{"a": 2, "b": 3}')],
            [Block.tool_call("c3", "nope", {}), Block.tool_call("c4", "add", "{broken")],
            Block.llm_text("done"),
        ]
    )
    loop = with_middleware(engine, tool_loop(ToolRegistry([get_weather, add])))
    out = await loop.run_inference(_seed())
    unknown = "unknown tool 'nope'; available tools: get_weather, add"
    broken = "arguments for add are not valid JSON (Expecting property name enclosed in double quotes at char 1)"
    assert _shape(out) == [
        ("user", {"text": "hi"}),
        ("tool_call", {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}),
        ("tool_call", {"id": "c2", "name": "add", "args": '{"a": 2, "b": 3}'}),
        ("tool_use", {"id": "c1", "result": "sunny in Paris"}),
        ("tool_use", {"id": "c2", "result": "5"}),
        ("tool_call", {"id": "c3", "name": "nope", "args": {}}),
        ("tool_call", {"id": "c4", "name": "add", "args": "{broken"}),
        ("tool_use", {"id": "c3", "result": "", "error": unknown}),
        ("tool_use", {"id": "c4", "result": "", "error": broken}),
        ("llm_text", {"text": "done"}),
    ]
    # The second model call saw the first results.
    assert [b.kind for b in engine.turns[1].blocks][-2:] == [BlockKind.TOOL_USE, BlockKind.TOOL_USE]
    assert len(engine.turns) == 3


async def test_max_iterations_raises_only_while_calls_are_still_pending() -> None:
    def calls_forever(turn: Turn) -> None:
        n = len(turn.find(BlockKind.TOOL_CALL))
        turn.append(Block.tool_call(f"c{n}", "add", {"a": n, "b": 1}))

    engine = FunctionEngine(calls_forever)
    with pytest.raises(
        gp.MaxIterationsError, match="ran the model 3 times and it still asks for tools \\(add\\)"
    ) as info:
        await with_middleware(engine, tool_loop(ToolRegistry([add]), max_iterations=3)).run_inference(_seed())
    assert engine.calls == 3
    assert info.value.turn is not None
    assert _shape(info.value.turn) == [
        ("user", {"text": "hi"}),
        ("tool_call", {"id": "c0", "name": "add", "args": {"a": 0, "b": 1}}),
        ("tool_use", {"id": "c0", "result": "1"}),
        ("tool_call", {"id": "c1", "name": "add", "args": {"a": 1, "b": 1}}),
        ("tool_use", {"id": "c1", "result": "2"}),
        ("tool_call", {"id": "c2", "name": "add", "args": {"a": 2, "b": 1}}),  # pending, not executed
    ]


async def test_reaching_the_bound_with_nothing_pending_is_not_an_error() -> None:
    engine = ScriptedEngine(
        [
            Block.tool_call("c1", "add", {"a": 1, "b": 1}),
            Block.tool_call("c2", "add", {"a": 2, "b": 2}),
            Block.llm_text("4"),
        ]
    )
    out = await with_middleware(engine, tool_loop(ToolRegistry([add]), max_iterations=3)).run_inference(_seed())
    assert out.blocks[-1].payload == {"text": "4"}
    assert engine.remaining == 0


async def test_turn_tool_config_narrows_tools_and_overrides_the_bound() -> None:
    offered: list[tuple[ToolDefinition, ...]] = []

    def engine_fn(turn: Turn) -> None:
        offered.append(current_tools())
        turn.append(Block.tool_call(f"c{len(offered)}", "get_weather", {"city": "Rome"}))

    reg = ToolRegistry([get_weather, add])
    seed = _seed()
    TOOL_CONFIG.set(seed.data, ToolConfig(enabled=["add"], max_iterations=2))
    with pytest.raises(gp.MaxIterationsError) as info:
        await with_middleware(FunctionEngine(engine_fn), tool_loop(reg, max_iterations=10)).run_inference(seed)
    assert offered == [(reg.get("add").definition,)] * 2  # type: ignore[union-attr]
    assert info.value.turn is not None
    # get_weather is registered but not enabled for this turn: the model sees it as unknown.
    assert info.value.turn.blocks[2].payload["error"] == "unknown tool 'get_weather'; available tools: add"
    assert current_tools() == ()


async def test_tool_choice_none_offers_no_tools() -> None:
    offered: list[tuple[ToolDefinition, ...]] = []

    def engine_fn(turn: Turn) -> None:
        offered.append(current_tools())
        turn.append(Block.llm_text("ok"))

    seed = _seed()
    TOOL_CONFIG.set(seed.data, ToolConfig(tool_choice="none"))
    await with_middleware(FunctionEngine(engine_fn), tool_loop(ToolRegistry([add]))).run_inference(seed)
    assert offered == [()]


def test_bad_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="max_iterations must be at least 1"):
        tool_loop(ToolRegistry(), max_iterations=0)
