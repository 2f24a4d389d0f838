"""Session: Policy A ids, the seeds' two-inference provenance timeline, busy, cancel, events, store."""

from __future__ import annotations

import asyncio
import threading

import pytest

import geppetto as gp
from geppetto.engine import Handler
from geppetto.events import Event, EventInterrupt, EventStart, EventToolResult, metadata_for, publish
from geppetto.middleware import Middleware, system_prompt
from geppetto.session import ExecutionHandle, MemoryTurnStore, Session, TurnStore
from geppetto.testing import FunctionEngine, ScriptedEngine
from geppetto.turns import (
    BLOCK_META_INFERENCE_ID,
    TURN_META_INFERENCE_ID,
    TURN_META_SESSION_ID,
    Block,
    Turn,
)

IID = str(BLOCK_META_INFERENCE_ID)


def _timeline(turn: Turn) -> list[tuple[str, str, str, dict[str, object]]]:
    return [(b.kind.value, b.text, b.turn_id, dict(b.metadata)) for b in turn.blocks]


async def test_two_inference_provenance_timeline_from_the_seeds() -> None:
    session = Session(ScriptedEngine([Block.llm_text("A1"), Block.llm_text("A2")]), session_id="S")

    seed1 = session.prompt("U1")
    t1 = seed1.id
    h1 = session.start_inference()
    out1 = await h1.wait()
    i1 = h1.inference_id

    seed2 = session.prompt("U2")
    t2 = seed2.id
    h2 = session.start_inference()
    out2 = await h2.wait()
    i2 = h2.inference_id

    assert len({t1, t2, i1, i2}) == 4
    assert (h1.turn_id, h2.turn_id, out1.id, out2.id) == (t1, t2, t1, t2)
    assert _timeline(out1) == [
        ("user", "U1", t1, {IID: i1}),
        ("llm_text", "A1", t1, {IID: i1}),
    ]
    assert _timeline(out2) == [
        ("user", "U1", t1, {IID: i1}),  # reused
        ("llm_text", "A1", t1, {IID: i1}),  # reused
        ("user", "U2", t2, {IID: i2}),  # new
        ("llm_text", "A2", t2, {IID: i2}),  # new
    ]
    assert [b.id for b in out2.blocks[:2]] == [b.id for b in out1.blocks]
    assert dict(out1.metadata) == {str(TURN_META_SESSION_ID): "S", str(TURN_META_INFERENCE_ID): i1}
    assert dict(out2.metadata) == {str(TURN_META_SESSION_ID): "S", str(TURN_META_INFERENCE_ID): i2}
    # Append-only history: seed, output, seed, output; seeds are untouched by the stamping pass.
    assert session.history == (seed1, out1, seed2, out2)
    assert _timeline(seed1) == [("user", "U1", t1, {})]
    assert _timeline(seed2) == [
        ("user", "U1", t1, {IID: i1}),
        ("llm_text", "A1", t1, {IID: i1}),
        ("user", "U2", t2, {}),
    ]
    assert dict(seed2.metadata) == {str(TURN_META_SESSION_ID): "S"}


async def test_policy_a_prompt_clones_the_latest_with_a_fresh_id() -> None:
    session = Session(ScriptedEngine([Block.llm_text("A1")]))
    first = Turn()
    first.append(Block.system("be brief"))
    session.append(first)
    seed = session.prompt("hello")
    assert seed.id != first.id
    assert [(b.kind.value, b.text) for b in seed.blocks] == [("system", "be brief"), ("user", "hello")]
    assert seed.blocks[0] is not first.blocks[0]
    assert seed.blocks[1].turn_id == seed.id
    out = await session.start_inference().wait()
    assert out.id == seed.id
    assert session.latest is out
    # A block inherited from a turn no inference produced keeps its own turn id and gets no inference id.
    assert (out.blocks[0].turn_id, dict(out.blocks[0].metadata)) == (first.id, {})


async def test_blocks_without_turn_id_get_the_current_turn_id() -> None:
    def engine_fn(turn: Turn) -> None:
        turn.blocks.append(Block.llm_text("appended without stamping"))

    session = Session(FunctionEngine(engine_fn))
    seed = session.prompt("x")
    handle = session.start_inference()
    out = await handle.wait()
    assert (out.blocks[-1].turn_id, dict(out.blocks[-1].metadata)) == (seed.id, {IID: handle.inference_id})


async def test_one_inference_at_a_time() -> None:
    gate = asyncio.Event()

    async def engine_fn(turn: Turn) -> None:
        await gate.wait()
        turn.append(Block.llm_text("ok"))

    session = Session(FunctionEngine(engine_fn))
    session.prompt("go")
    handle = session.start_inference()
    assert handle.running and session.running
    with pytest.raises(gp.SessionBusyError, match=r"await handle.wait\(\) or call handle.cancel\(\) first"):
        session.start_inference()
    with pytest.raises(gp.SessionBusyError):
        session.prompt("again")
    gate.set()
    await handle.wait()
    assert not handle.running and not session.running
    session.prompt("again")
    gate.set()
    assert (await session.start_inference().wait()).blocks[-1].text == "ok"


async def test_cancel_during_a_slow_engine() -> None:
    started = asyncio.Event()
    stopped = asyncio.Event()

    async def slow(turn: Turn) -> None:
        turn.append(Block.llm_text("partial"))
        started.set()
        try:
            await asyncio.sleep(30)
        finally:
            stopped.set()

    events: list[Event] = []
    session = Session(FunctionEngine(slow), sinks=[events.append])
    seed = session.prompt("go")
    snapshot = seed.clone()
    handle = session.start_inference()
    await started.wait()
    assert handle.cancel() is True
    with pytest.raises(gp.InferenceCancelled, match=f"inference {handle.inference_id} was cancelled"):
        await asyncio.wait_for(handle.wait(), 5)
    assert stopped.is_set() and not handle.running
    assert session.history == (seed,)
    assert seed == snapshot  # the seed is intact
    assert [type(e) for e in events] == [EventInterrupt]
    assert events[0].metadata.inference_id == handle.inference_id
    assert handle.cancel() is False


async def test_cancel_during_slow_tools_stops_them_and_keeps_history() -> None:
    async_started = asyncio.Event()
    async_cancelled = asyncio.Event()
    thread_started = threading.Event()
    release = threading.Event()

    async def slow_async() -> str:
        """Hangs."""
        async_started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            async_cancelled.set()
            raise
        return "late"

    def slow_sync() -> str:
        """Blocks a thread."""
        thread_started.set()
        release.wait(10)
        return "late"

    engine = ScriptedEngine(
        [[Block.tool_call("c1", "slow_async", {}), Block.tool_call("c2", "slow_sync", {})], Block.llm_text("never")]
    )
    session = Session(engine, tools=[slow_async, slow_sync])
    seed = session.prompt("go")
    handle = session.start_inference()
    await async_started.wait()
    assert await asyncio.to_thread(thread_started.wait, 5)
    handle.cancel()
    with pytest.raises(gp.InferenceCancelled):
        await asyncio.wait_for(handle.wait(), 5)
    release.set()
    assert async_cancelled.is_set()
    assert session.history == (seed,)
    assert engine.remaining == 1  # the model was not called again


async def test_engine_failure_propagates_and_adds_no_snapshot() -> None:
    def fail(turn: Turn) -> None:
        turn.append(Block.llm_text("half"))
        raise gp.ServerError("overloaded", status=529, provider="anthropic")

    session = Session(FunctionEngine(fail))
    seed = session.prompt("go")
    with pytest.raises(gp.ServerError, match="overloaded"):
        await session.start_inference().wait()
    assert session.history == (seed,)
    assert [b.text for b in seed.blocks] == ["go"]


async def test_tools_run_innermost_and_events_carry_session_and_inference_ids() -> None:
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    outer_calls = 0

    def counting() -> Middleware:
        def mw(next_handler: Handler) -> Handler:
            async def handler(turn: Turn) -> Turn:
                nonlocal outer_calls
                outer_calls += 1
                return await next_handler(turn)

            return handler

        return mw

    steps = iter([[Block.tool_call("c1", "add", {"a": 2, "b": 2})], [Block.llm_text("4")]])

    def engine_fn(turn: Turn) -> None:
        publish(EventStart(metadata_for(turn)))
        for block in next(steps):
            turn.append(block)

    events: list[Event] = []
    session = Session(
        FunctionEngine(engine_fn),
        tools=[add],
        middlewares=[counting(), system_prompt("be exact")],
        sinks=[events.append],
        session_id="S",
    )
    seed = session.prompt("2+2?")
    handle = session.start_inference()
    out = await handle.wait()
    assert outer_calls == 1
    assert [(b.kind.value, b.payload) for b in out.blocks] == [
        ("system", {"text": "be exact"}),
        ("user", {"text": "2+2?"}),
        ("tool_call", {"id": "c1", "name": "add", "args": {"a": 2, "b": 2}}),
        ("tool_use", {"id": "c1", "result": "4"}),
        ("llm_text", {"text": "4"}),
    ]
    assert {b.turn_id for b in out.blocks} == {seed.id}
    assert {b.metadata.get(IID) for b in out.blocks} == {handle.inference_id}
    # tool_call: FunctionEngine announces the call its function added, as a real engine would
    assert [e.type for e in events] == ["start", "tool_call", "tool_call_started", "tool_result", "start"]
    assert {(e.metadata.session_id, e.metadata.inference_id, e.metadata.turn_id) for e in events} == {
        ("S", handle.inference_id, seed.id)
    }
    assert next(e for e in events if isinstance(e, EventToolResult)).result == "4"


async def test_store_gets_every_completed_snapshot_and_restores_a_session() -> None:
    store = MemoryTurnStore()
    assert isinstance(store, TurnStore)
    session = Session(ScriptedEngine([Block.llm_text("A1"), Block.llm_text("A2")]), store=store)
    out1 = await session.run("U1")
    out2 = await session.run("U2")
    assert await store.list_sessions() == [session.session_id]
    assert await store.load_session(session.session_id) == [out1, out2]
    assert await store.load_session("unknown") == []

    restored = await Session.restore(ScriptedEngine([Block.llm_text("A3")]), store, session.session_id)
    assert restored.history == (out2,)  # a restore reads the latest snapshot; older ones stay in the store
    out3 = await restored.run("U3")
    assert [b.text for b in out3.blocks] == ["U1", "A1", "U2", "A2", "U3", "A3"]
    with pytest.raises(gp.UsageError, match=r"store\.list_sessions"):
        await Session.restore(ScriptedEngine(), store, "missing")


async def test_cancel_while_the_store_saves_completes_the_inference() -> None:
    """Once the engine has answered, a cancel during the save waits for it: history, store and caller agree."""
    saving, release = asyncio.Event(), asyncio.Event()

    class SlowStore(MemoryTurnStore):
        async def save_snapshot(self, session_id: str, turn: Turn, **kw: object) -> None:
            saving.set()
            await release.wait()
            await super().save_snapshot(session_id, turn)

    store = SlowStore()
    session = Session(ScriptedEngine([Block.llm_text("done")]), store=store)
    session.prompt("hi")
    handle = session.start_inference()
    await saving.wait()
    assert handle.cancel()
    await asyncio.sleep(0)
    release.set()
    out = await handle.wait()
    assert out.blocks[-1].text == "done"
    assert session.history[-1] is out and not session.running
    assert await store.load_session(session.session_id) == [out]


async def test_store_failure_keeps_the_output_in_history_and_names_the_fix() -> None:
    class BrokenStore(MemoryTurnStore):
        async def save_snapshot(self, session_id: str, turn: Turn, **kw: object) -> None:
            raise gp.StoreError("disk full")

    session = Session(ScriptedEngine([Block.llm_text("kept")]), store=BrokenStore())
    with pytest.raises(gp.StoreError, match=r"disk full.*output is session.latest; save it again"):
        await session.run("hi")
    latest = session.latest
    assert latest is not None and latest.blocks[-1].text == "kept"


async def test_use_switches_engines_and_keeps_middlewares_tools_and_history() -> None:
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    first = ScriptedEngine([Block.llm_text("hello")])
    second = ScriptedEngine([Block.tool_call("c1", "add", {"a": 1, "b": 2}), Block.llm_text("3")])
    session = Session(first, tools=[add], middlewares=[system_prompt("be exact")])
    await session.run("hi")
    session.use(second)
    out = await session.run("1+2?")
    assert [(b.kind.value, b.text or b.payload.get("result")) for b in out.blocks] == [
        ("system", "be exact"),
        ("user", "hi"),
        ("llm_text", "hello"),
        ("user", "1+2?"),
        ("tool_call", None),
        ("tool_use", "3"),  # the session's tool loop ran around the new engine
        ("llm_text", "3"),
    ]
    assert len(session.history) == 4 and session.history[1].blocks[-1].text == "hello"  # seed, output, ×2
    with pytest.raises(gp.UsageError, match="not an engine"):
        session.use(ScriptedEngine)  # type: ignore[arg-type]


async def test_bad_input_names_the_fix() -> None:
    with pytest.raises(gp.UsageError, match="Session needs a model string or an engine"):
        Session(None)
    with pytest.raises(
        gp.UsageError, match="model string 'not an engine' names no provider: write it as 'provider:model'"
    ):
        Session("not an engine")  # a string is a model string
    with pytest.raises(gp.UsageError, match=r"got the class ScriptedEngine, not an engine.*ScriptedEngine\(\.\.\.\)"):
        Session(ScriptedEngine)  # type: ignore[arg-type]
    session = Session(ScriptedEngine())
    with pytest.raises(gp.UsageError, match=r"call session.prompt\(text\)"):
        session.start_inference()
    session.append(Turn())
    with pytest.raises(gp.UsageError, match="latest turn is empty"):
        session.start_inference()


def test_handle_and_session_are_exported() -> None:
    assert gp.Session is Session and gp.ExecutionHandle is ExecutionHandle


def test_start_inference_outside_an_event_loop_names_the_fix() -> None:
    session = Session(ScriptedEngine([Block.llm_text("A")]))
    session.prompt("x")
    with pytest.raises(gp.UsageError, match="needs a running event loop"):
        session.start_inference()
    assert not session.running


async def test_a_saved_snapshot_never_changes_with_the_output_the_caller_edits(tmp_path: object) -> None:
    """Stores that read the Turn at once get the Session's own output (no copy); a store that keeps what
    it is given gets a copy. Either way, editing ``session.latest`` afterwards leaves the snapshot alone."""
    from geppetto.session.stores import open_store

    kept: list[Turn] = []

    class KeepingStore:
        async def save_snapshot(self, session_id: str, turn: Turn) -> None:
            kept.append(turn)

        async def load_session(self, session_id: str) -> list[Turn]:
            return list(kept)

        async def list_sessions(self) -> list[str]:
            return ["S"]

    sql = open_store(str(tmp_path) + "/s.db")  # type: ignore[operator]
    for store in (MemoryTurnStore(), sql, KeepingStore()):
        session = Session(ScriptedEngine([Block.llm_text("A1"), Block.llm_text("A2")]), store=store, session_id="S")
        out = await session.run("U1")
        is_copy = out is not (await store.load_session("S"))[-1]
        assert is_copy, "a loaded snapshot is never the caller's Turn"
        out.blocks[1].payload["text"] = "edited"
        out.append(Block.user("added"))
        saved = (await store.load_session("S"))[-1]
        assert [b.text for b in saved.blocks] == ["U1", "A1"], type(store).__name__
        await session.run("U2")
        saved = (await store.load_session("S"))[-1]
        assert [b.text for b in saved.blocks] == ["U1", "edited", "added", "U2", "A2"], type(store).__name__
    sql.close()
