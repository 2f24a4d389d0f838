"""tool_loop: pending calls, call-order results, re-inference, tool config, max-iterations semantics."""

from __future__ import annotations

import pytest

import geppetto as gp
from geppetto.events import EventToolCallRequested, EventToolCallStarted, EventToolResult, with_sinks
from geppetto.events._types import Event
from geppetto.middleware import tool_loop, with_middleware
from geppetto.testing import FunctionEngine, ScriptedEngine
from geppetto.tools import (
    TOOL_CONFIG,
    ToolConfig,
    ToolDefinition,
    ToolRegistry,
    current_tools,
    pending_tool_calls,
    request_tool_choice,
)
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


async def test_tool_choice_none_offers_no_tools_and_runs_no_call_the_model_makes_anyway() -> None:
    offered: list[tuple[ToolDefinition, ...]] = []
    runs = 0

    def counted_add(a: int, b: int) -> int:
        """Add, counting runs."""
        nonlocal runs
        runs += 1
        return a + b

    def engine_fn(turn: Turn) -> None:
        offered.append(current_tools())
        if len(offered) == 1:  # a model that ignores tool_choice
            turn.append(Block.tool_call("c1", "counted_add", {"a": 1, "b": 2}))
        else:
            turn.append(Block.llm_text("ok"))

    seed = _seed()
    TOOL_CONFIG.set(seed.data, ToolConfig(tool_choice="none"))
    loop = with_middleware(FunctionEngine(engine_fn), tool_loop(ToolRegistry([counted_add])))
    out = await loop.run_inference(seed)
    assert offered == [(), ()]
    assert runs == 0
    assert _shape(out)[1:] == [
        ("tool_call", {"id": "c1", "name": "counted_add", "args": {"a": 1, "b": 2}}),
        (
            "tool_use",
            {
                "id": "c1",
                "result": "",
                "error": "tools are disabled for this turn (tool_choice is 'none'); the call was not run, "
                "answer without tools",
            },
        ),
        ("llm_text", {"text": "ok"}),
    ]


def _obedient_model(choices: list[object], engine_choice: str | None = None) -> FunctionEngine:
    """A model that calls add whenever the request forces a tool, and answers otherwise."""

    def engine_fn(turn: Turn) -> None:
        choice = request_tool_choice(engine_choice, turn)
        choices.append(choice)
        if choice in ("required", "add"):
            turn.append(Block.tool_call(f"c{len(choices)}", "add", {"a": 1, "b": 1}))
        else:
            turn.append(Block.llm_text("2"))

    return FunctionEngine(engine_fn)


@pytest.mark.parametrize("forced", ["required", "add"])
async def test_a_forced_tool_choice_relaxes_to_auto_after_the_first_step(forced: str) -> None:
    choices: list[object] = []
    seed = _seed()
    TOOL_CONFIG.set(seed.data, ToolConfig(tool_choice=forced))
    out = await with_middleware(_obedient_model(choices), tool_loop(ToolRegistry([add]))).run_inference(seed)
    assert choices == [forced, "auto"]
    assert [b.kind.value for b in out.blocks] == ["user", "tool_call", "tool_use", "llm_text"]
    assert TOOL_CONFIG.get(out.data) == ToolConfig(tool_choice=forced)  # the turn's config is unchanged
    assert request_tool_choice(None, out) == forced  # outside the loop nothing is relaxed


async def test_an_engines_own_forced_choice_relaxes_too_and_none_and_auto_stay() -> None:
    choices: list[object] = []
    await with_middleware(_obedient_model(choices, "required"), tool_loop(ToolRegistry([add]))).run_inference(_seed())
    assert choices == ["required", "auto"]

    turn = _seed()
    assert request_tool_choice(None, turn) is None
    TOOL_CONFIG.set(turn.data, ToolConfig(tool_choice="auto"))
    assert request_tool_choice(None, turn) is None
    assert request_tool_choice("none", turn) == "none"
    forced = {"type": "function", "name": "add"}
    assert request_tool_choice(forced, turn) == forced


async def test_a_reused_call_id_on_a_later_step_is_run_under_a_fresh_id() -> None:
    steps = 0

    def engine_fn(turn: Turn) -> None:
        nonlocal steps
        steps += 1
        if steps <= 2:  # a compatible server numbering calls from call_0 on every step
            turn.append(Block.tool_call("call_0", "add", {"a": steps, "b": 10}))
        else:
            turn.append(Block.llm_text("done"))

    out = await with_middleware(FunctionEngine(engine_fn), tool_loop(ToolRegistry([add]))).run_inference(_seed())
    assert steps == 3
    calls = out.find(BlockKind.TOOL_CALL)
    uses = out.find(BlockKind.TOOL_USE)
    assert calls[0].payload["id"] == "call_0"
    fresh = calls[1].payload["id"]
    assert isinstance(fresh, str) and fresh.startswith("call_") and fresh != "call_0"
    assert [u.payload for u in uses] == [{"id": "call_0", "result": "11"}, {"id": fresh, "result": "12"}]
    assert pending_tool_calls(out) == []


async def test_duplicate_and_empty_ids_in_one_step_each_get_a_unique_id_and_run() -> None:
    engine = ScriptedEngine(
        [
            [
                Block.tool_call("dup", "add", {"a": 1, "b": 1}),
                Block.tool_call("dup", "add", {"a": 2, "b": 2}),
                Block.tool_call("", "add", {"a": 3, "b": 3}),
                Block.tool_call("", "add", {"a": 4, "b": 4}),
            ],
            Block.llm_text("done"),
        ]
    )
    out = await with_middleware(engine, tool_loop(ToolRegistry([add]))).run_inference(_seed())
    ids = [str(b.payload["id"]) for b in out.find(BlockKind.TOOL_CALL)]
    assert ids[0] == "dup" and len(set(ids)) == 4 and all(ids)
    assert [(b.payload["id"], b.payload["result"]) for b in out.find(BlockKind.TOOL_USE)] == list(
        zip(ids, ["2", "4", "6", "8"], strict=True)
    )
    # The model's next step saw the same ids as the final turn.
    assert [b.payload["id"] for b in engine.turns[1].find(BlockKind.TOOL_CALL)] == ids


async def test_the_loop_publishes_started_and_result_but_leaves_requested_to_the_engine() -> None:
    engine = ScriptedEngine(
        [[Block.tool_call("c1", "add", {"a": 1, "b": 2}), Block.tool_call("c2", "nope", {})], Block.llm_text("3")]
    )
    seen: list[Event] = []
    with with_sinks(seen.append):
        await with_middleware(engine, tool_loop(ToolRegistry([add]))).run_inference(_seed())
    tool_events = [
        (type(e).__name__, e.call_id)  # type: ignore[attr-defined]
        for e in seen
        if isinstance(e, EventToolCallRequested | EventToolCallStarted | EventToolResult)
    ]
    # the engine (ScriptedEngine, like a real one) announced each call once; the loop adds none of its own
    assert sorted(tool_events) == [
        ("EventToolCallRequested", "c1"),
        ("EventToolCallRequested", "c2"),
        ("EventToolCallStarted", "c1"),
        ("EventToolResult", "c1"),
        ("EventToolResult", "c2"),
    ]
    assert tool_events[:2] == [("EventToolCallRequested", "c1"), ("EventToolCallRequested", "c2")]
    assert tool_events.index(("EventToolCallStarted", "c1")) < tool_events.index(("EventToolResult", "c1"))


async def test_tools_run_outside_the_offer_made_to_the_engine() -> None:
    seen_by_tool: list[tuple[ToolDefinition, ...]] = []

    def probe() -> str:
        """Looks at the offered tools from inside a tool."""
        seen_by_tool.append(current_tools())
        return "ok"

    engine = ScriptedEngine([Block.tool_call("c1", "probe", {}), Block.llm_text("done")])
    await with_middleware(engine, tool_loop(ToolRegistry([probe]))).run_inference(_seed())
    assert seen_by_tool == [()]  # an engine run inside a tool does not offer the outer loop's tools


def test_bad_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="max_iterations must be at least 1"):
        tool_loop(ToolRegistry(), max_iterations=0)
