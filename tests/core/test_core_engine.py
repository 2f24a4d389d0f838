"""run_sync and the public test doubles FunctionEngine and ScriptedEngine."""

from __future__ import annotations

import io
from typing import Any

import pytest

import geppetto as gp
from geppetto.events import (
    Event,
    EventFinal,
    EventReasoningDelta,
    EventTextDelta,
    EventToolCallRequested,
    TextPrinter,
    metadata_for,
    publish,
    with_sinks,
)
from geppetto.testing import FunctionEngine, ScriptedEngine
from geppetto.turns import TURN_META_SESSION_ID, Block, BlockKind, Turn


def test_run_sync_runs_an_engine() -> None:
    def fn(turn: Turn) -> None:
        turn.append(Block.llm_text("sync"))

    engine = FunctionEngine(fn)
    turn = Turn(id="t")
    out = gp.run_sync(engine, turn)
    assert out is turn
    assert [(b.text, b.turn_id) for b in out.blocks] == [("sync", "t")]
    assert engine.calls == 1


async def test_run_sync_inside_a_running_loop_is_a_usage_error() -> None:
    engine = FunctionEngine(lambda t: None)
    with pytest.raises(gp.UsageError) as info:
        gp.run_sync(engine, Turn())
    assert str(info.value) == (
        "run_sync() was called inside a running event loop; use `await engine.run_inference(turn)`"
    )
    assert engine.calls == 0


async def test_function_engine_async_fn_returning_a_new_turn() -> None:
    replacement = Turn(id="other")

    async def fn(turn: Turn) -> Turn:
        replacement.append(Block.llm_text(f"saw {len(turn.blocks)}"))
        return replacement

    engine = FunctionEngine(fn)
    assert isinstance(engine, gp.Engine)
    out = await engine.run_inference(Turn(blocks=[Block.user("u")]))
    assert out is replacement
    assert [b.text for b in out.blocks] == ["saw 1"]
    await engine.run_inference(Turn())
    assert engine.calls == 2


async def test_function_engine_propagates_errors() -> None:
    def fn(turn: Turn) -> None:
        raise gp.RateLimitError("slow down", status=429, provider="openai")

    with pytest.raises(gp.RateLimitError) as info:
        await FunctionEngine(fn).run_inference(Turn())
    assert str(info.value) == "[openai 429] slow down"


async def test_scripted_engine_appends_steps_with_fresh_ids() -> None:
    call = Block.tool_call("c1", "f", {"a": 1})
    call.turn_id = "ignored"
    engine = ScriptedEngine([call, [Block.llm_text("a"), Block.llm_text("b")]])
    assert engine.remaining == 2
    turn = Turn(id="t1", blocks=[Block.user("u")])
    await engine.run_inference(turn)
    first = turn.blocks[1]
    assert (first.kind, first.payload, first.turn_id) == (
        BlockKind.TOOL_CALL,
        {"id": "c1", "name": "f", "args": {"a": 1}},
        "t1",
    )
    assert first.id != call.id
    first.payload["args"]["a"] = 2  # the script's block is a template, not shared
    assert call.payload["args"] == {"a": 1}
    await engine.run_inference(turn)
    assert [b.text for b in turn.blocks[2:]] == ["a", "b"]
    assert engine.remaining == 0
    # the engine recorded what it was given, as clones
    assert [[b.kind for b in t.blocks] for t in engine.turns] == [
        [BlockKind.USER],
        [BlockKind.USER, BlockKind.TOOL_CALL],
    ]
    assert engine.turns[1].blocks[1].payload["args"] == {"a": 2}
    assert engine.turns[0] is not turn


async def test_scripted_engine_exhaustion_and_push() -> None:
    engine = ScriptedEngine()
    turn = Turn()
    with pytest.raises(gp.UsageError) as info:
        await engine.run_inference(turn)
    assert str(info.value) == (
        "ScriptedEngine has no step left for call 1; queue more with push() or in the constructor"
    )
    assert turn.blocks == []
    engine.push(Block.llm_text("x"), Block.llm_text("y"))
    assert engine.remaining == 1
    await engine.run_inference(turn)
    assert [b.text for b in turn.blocks] == ["x", "y"]
    assert len({b.id for b in turn.blocks}) == 2
    with pytest.raises(gp.UsageError, match="no step left for call 3"):
        await engine.run_inference(turn)


# -- the doubles publish events like real engines ---------------------------------------------


def _summary(events: list[Event]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in events:
        if isinstance(e, EventToolCallRequested):
            out.append((e.type, e.call_id, e.name, e.args))
        elif isinstance(e, EventTextDelta | EventReasoningDelta):
            out.append((e.type, e.delta))
        elif isinstance(e, EventFinal):
            out.append((e.type, e.text, e.metadata.stop_reason))
        else:
            out.append((e.type,))
    return out


async def test_scripted_engine_publishes_what_a_streaming_engine_would() -> None:
    engine = ScriptedEngine(
        [
            [
                Block.reasoning("hmm"),
                Block.llm_text("Checking."),
                Block.tool_call("c1", "add", {"a": 1}),
                Block.tool_call("c2", "mul", "{bad"),
            ],
            Block.llm_text("Done."),
        ]
    )
    turn = Turn(id="t1", blocks=[Block.user("u")])
    TURN_META_SESSION_ID.set(turn.metadata, "s1")
    seen: list[Event] = []
    with with_sinks(seen.append):
        await engine.run_inference(turn)
        await engine.run_inference(turn)
    assert _summary(seen) == [
        ("start",),
        ("reasoning_delta", "hmm"),
        ("text_delta", "Checking."),
        ("tool_call", "c1", "add", {"a": 1}),
        ("tool_call", "c2", "mul", "{bad"),
        ("final", "Checking.", "tool_calls"),
        ("start",),
        ("text_delta", "Done."),
        ("final", "Done.", "end_turn"),
    ]
    assert {(e.metadata.session_id, e.metadata.turn_id, e.metadata.provider) for e in seen} == {("s1", "t1", "testing")}


async def test_function_engine_announces_the_tool_calls_it_added() -> None:
    old = Block.tool_call("old", "f", {})

    def fn(turn: Turn) -> None:
        turn.append(Block.llm_text("calling"))
        turn.append(Block.tool_call("c1", "add", {"a": 1}))
        call = turn.append(Block.tool_call("c2", "mul", {}))
        # a function that announces a call itself is not doubled
        publish(EventToolCallRequested(metadata_for(turn), "c2", "mul", {}))
        assert call.kind is BlockKind.TOOL_CALL

    seen: list[Event] = []
    with with_sinks(seen.append):
        await FunctionEngine(fn).run_inference(Turn(id="t", blocks=[old]))
    assert _summary(seen) == [("tool_call", "c2", "mul", {}), ("tool_call", "c1", "add", {"a": 1})]
    # a function that adds no tool call publishes nothing it did not publish itself
    quiet: list[Event] = []
    with with_sinks(quiet.append):
        await FunctionEngine(lambda t: None).run_inference(Turn(blocks=[old]))
    assert quiet == []


async def test_function_engine_announces_calls_on_a_returned_turn() -> None:
    def fn(turn: Turn) -> Turn:
        other = turn.clone()
        other.append(Block.tool_call("c9", "lookup", {"q": "x"}))
        return other

    seen: list[Event] = []
    with with_sinks(seen.append):
        await FunctionEngine(fn).run_inference(Turn(id="t", blocks=[Block.user("u")]))
    assert _summary(seen) == [("tool_call", "c9", "lookup", {"q": "x"})]


async def test_text_printer_shows_a_doubles_tool_calls_through_the_tool_loop() -> None:
    from geppetto.middleware import tool_loop
    from geppetto.tools import ToolRegistry

    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    engine = ScriptedEngine([Block.tool_call("c1", "add", {"a": 1, "b": 2}), Block.llm_text("3")])
    out = io.StringIO()
    with with_sinks(TextPrinter(out)):
        await gp.with_middleware(engine, tool_loop(ToolRegistry([add]))).run_inference(Turn(blocks=[Block.user("?")]))
    assert out.getvalue() == '→ add({"a": 1, "b": 2})\n← add: 3\n3\n'
