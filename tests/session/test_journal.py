"""The journal of side effects: a tool call whose result is journaled never runs again when an interrupted
inference goes on (``Session.resume``), and one that started without a result follows its tool's
``on_interrupted`` policy; with the in-memory store, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import geppetto as gp
from geppetto import ProviderError
from geppetto.session import MemoryTurnStore
from geppetto.testing import ScriptedEngine
from geppetto.tools._journal import INTERRUPTED_ERROR
from geppetto.turns import BLOCK_META_RESPONSE_ID, TURN_META_INFERENCE_ID, loads_json


class FailingOnce(ScriptedEngine):
    """A scripted engine whose request number ``fail_at`` (1-based) fails with a provider error, once."""

    def __init__(self, steps: list[Any], fail_at: int) -> None:
        super().__init__(steps)
        self.fail_at, self.calls = fail_at, 0

    async def run_inference(self, turn: gp.Turn) -> gp.Turn:
        self.calls += 1
        if self.calls == self.fail_at:
            raise ProviderError("the connection dropped", status=503)
        return await super().run_inference(turn)


def _steps() -> list[Any]:
    return [
        [gp.Block.llm_text("Let me look."), gp.Block.tool_call("call_w", "weather", {"city": "Paris"})],
        gp.Block.llm_text("It is sunny in Paris."),
    ]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    if request.param == "memory":
        yield MemoryTurnStore()
        return
    from geppetto.session.stores import open_store

    if request.param == "sqlite":
        opened = open_store(str(tmp_path / "s.db"))
    else:
        opened = open_store(request.getfixturevalue("postgres_target"))
    try:
        yield opened
    finally:
        opened.close()


async def test_a_journaled_result_is_not_run_again_when_the_inference_goes_on(store: Any) -> None:
    runs: list[str] = []

    @gp.tool
    def weather(city: str) -> str:
        """The weather in a city."""
        runs.append(city)
        return f"sunny in {city}"

    engine = FailingOnce(_steps(), fail_at=2)  # the request after the tool returned fails
    session = gp.Session(engine, tools=[weather], store=store)
    with pytest.raises(ProviderError):
        await session.run("Weather in Paris?")
    assert runs == ["Paris"]
    rows = await store.journal_read(session.session_id)
    assert [(r.entry, r.record.get("state")) for r in rows] == [
        ("step:000001", None),
        ("call:call_w", "done"),
        ("pub:call_w", None),  # its tool_result event went to the sinks
    ]
    interrupted = session.interrupted
    assert interrupted is not None

    # another process: the store holds no snapshot yet (it was the first prompt), only the journal
    again = gp.Session(
        FailingOnce(_steps()[1:], fail_at=0), tools=[weather], store=store, session_id=session.session_id
    )
    again._interrupted = interrupted
    out = await again.resume()
    assert runs == ["Paris"], "the journaled call is not run again"
    assert [(b.kind.value, b.text or b.payload.get("result")) for b in out.blocks] == [
        ("user", "Weather in Paris?"),
        ("llm_text", "Let me look."),
        ("tool_call", None),
        ("tool_use", "sunny in Paris"),
        ("llm_text", "It is sunny in Paris."),
    ]
    assert TURN_META_INFERENCE_ID.get(out.metadata) == interrupted, "the inference keeps its id"
    assert await store.journal_read(session.session_id) == [], "a completed inference clears the journal"


@pytest.mark.parametrize("marked", [True, False])
async def test_a_journaled_results_event_is_published_once_across_processes(store: Any, marked: bool) -> None:
    runs: list[str] = []

    @gp.tool
    def weather(city: str) -> str:
        """The weather in a city."""
        runs.append(city)
        return f"sunny in {city}"

    first: list[gp.events.Event] = []
    session = gp.Session(FailingOnce(_steps(), fail_at=2), tools=[weather], store=store, sinks=[first.append])
    with pytest.raises(ProviderError):
        await session.run("Weather in Paris?")
    rows = await store.journal_read(session.session_id)
    if not marked:  # the process stopped after journaling the result, before its event went out
        first = [e for e in first if not isinstance(e, gp.events.EventToolResult)]
        await store.journal_clear(session.session_id)
        for row in rows:
            if not row.entry.startswith("pub:"):
                await store.journal_write(session.session_id, row.inference_id, row.entry, row.record)
    second: list[gp.events.Event] = []
    again = gp.Session(
        FailingOnce(_steps()[1:], fail_at=0),
        tools=[weather],
        store=store,
        session_id=session.session_id,
        sinks=[second.append],
    )
    again._interrupted = session.interrupted
    await again.resume()
    assert runs == ["Paris"]
    results = [e.call_id for e in [*first, *second] if isinstance(e, gp.events.EventToolResult)]
    assert results == ["call_w"], "published once: by the first process, or by the second when it never went out"


def _interrupted_tool(policy: str | None, approval: bool) -> tuple[Any, list[str]]:
    runs: list[str] = []

    def weather(city: str) -> str:
        """The weather in a city."""
        runs.append(city)
        return f"sunny in {city}"

    options: dict[str, Any] = {"requires_approval": approval}
    if policy is not None:
        options["on_interrupted"] = policy
    return gp.tool(**options)(weather), runs


async def _cut_off_mid_call(store: Any, weather: Any) -> gp.Session:
    """A session whose store's journal shows ``call_w`` started and never returned."""
    session = gp.Session(FailingOnce(_steps(), fail_at=2), tools=[weather], store=store)
    session.prompt("Weather in Paris?")
    with pytest.raises(ProviderError):
        await session.start_inference().wait() if not weather.requires_approval else await _approved(session)
    rows = await store.journal_read(session.session_id)
    call = next(r for r in rows if r.entry == "call:call_w")
    record = {k: v for k, v in call.record.items() if k != "block"}
    await store.journal_write(session.session_id, call.inference_id, call.entry, {**record, "state": "started"})
    return session


async def _approved(session: gp.Session) -> gp.Turn:
    await session.start_inference().wait()
    return await session.resume({"call_w": True})


@pytest.mark.parametrize(
    ("policy", "approval", "expect"),
    [(None, False, "retry"), ("retry", False, "retry"), ("fail", False, "fail"), (None, True, "fail")],
)
async def test_a_call_cut_off_mid_run_follows_its_policy(
    store: Any, policy: str | None, approval: bool, expect: str
) -> None:
    weather, runs = _interrupted_tool(policy, approval)
    session = await _cut_off_mid_call(store, weather)
    assert runs == ["Paris"]
    assert session.interrupted is not None
    out = await session.resume()
    answer = next(b for b in out.blocks if b.kind is gp.BlockKind.TOOL_USE)
    if expect == "retry":
        assert runs == ["Paris", "Paris"]
        assert (answer.payload["result"], answer.payload.get("error")) == ("sunny in Paris", None)
    else:
        assert runs == ["Paris"], "not run again"
        assert (answer.payload["result"], answer.payload["error"]) == ("", INTERRUPTED_ERROR)
    assert out.blocks[-1].text == "It is sunny in Paris."


async def test_ask_holds_a_call_cut_off_mid_run_for_approval(store: Any) -> None:
    weather, runs = _interrupted_tool("ask", False)
    session = await _cut_off_mid_call(store, weather)
    held = await session.resume()
    assert runs == ["Paris"]
    assert [(c.call_id, c.kind) for c in session.pending_approvals] == [("call_w", "approval")]
    assert held.blocks[-1].kind is gp.BlockKind.TOOL_CALL
    out = await session.resume({"call_w": True})
    assert runs == ["Paris", "Paris"], "run again once a person approved it"
    assert out.blocks[-1].text == "It is sunny in Paris."


async def test_ask_denied_does_not_run_it_again(store: Any) -> None:
    weather, runs = _interrupted_tool("ask", False)
    session = await _cut_off_mid_call(store, weather)
    await session.resume()
    out = await session.resume({"call_w": "it already ran"})
    assert runs == ["Paris"]
    answer = next(b for b in out.blocks if b.kind is gp.BlockKind.TOOL_USE)
    assert "it already ran" in answer.payload["error"]


def test_on_interrupted_is_checked() -> None:
    with pytest.raises(gp.ToolDefinitionError, match="on_interrupted must be 'retry', 'fail' or 'ask'"):

        @gp.tool(on_interrupted="later")  # type: ignore[arg-type]
        def f(x: int) -> int:
            return x


_: Callable[..., Any] = _interrupted_tool


SCRIPT = str(Path(__file__).with_name("journal_process.py"))


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("earlier", [False, True], ids=["first prompt", "after a completed prompt"])
def test_a_process_killed_after_a_tool_returned_is_gone_on_with_by_the_next(
    kind: str, earlier: bool, geppetto_sim: Any, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from geppetto.simulator import Reply, ToolCall

    target = str(tmp_path / "s.db") if kind == "sqlite" else request.getfixturevalue("postgres_target")
    runs = tmp_path / "runs.txt"
    args = [target, geppetto_sim.openai_url, "s1", str(runs)]
    if earlier:
        geppetto_sim.queue(Reply(text="Hello."))
        asyncio.run(_first_prompt(target, geppetto_sim.openai_url))
    geppetto_sim.queue(
        Reply(tool_calls=[ToolCall("weather", {"city": "Paris"}, call_id="call_paris")]),
        Reply(text="It is sunny in Paris."),
    )
    first = subprocess.run([sys.executable, SCRIPT, "first", *args], capture_output=True, text=True, timeout=60)
    assert first.returncode == -signal.SIGKILL, first.stderr
    assert runs.read_text() == "Paris\n"
    second = subprocess.run([sys.executable, SCRIPT, "second", *args], capture_output=True, text=True, timeout=60)
    assert second.returncode == 0, second.stderr
    interrupted, document = second.stdout.split("\n", 1)
    assert interrupted
    assert runs.read_text() == "Paris\n", "the tool ran exactly once"
    out = loads_json(document)
    assert TURN_META_INFERENCE_ID.get(out.metadata) == interrupted
    assert [(b.kind.value, b.text or b.payload.get("result")) for b in out.blocks] == [
        *([("user", "Hi"), ("llm_text", "Hello.")] if earlier else []),
        ("user", "Weather in Paris?"),
        ("tool_call", None),
        ("tool_use", "sunny in Paris"),
        ("llm_text", "It is sunny in Paris."),
    ]
    posts = [r for r in geppetto_sim.requests if r.method == "POST"][1 if earlier else 0 :]
    assert len(posts) == 2, "one request per step: the step whose tool ran is not asked again"
    called = out.blocks[-3]
    assert posts[1].body["previous_response_id"] == called.metadata[str(BLOCK_META_RESPONSE_ID)]
    assert [i["type"] for i in posts[1].body["input"]] == ["function_call_output"]


async def _first_prompt(target: str, sim_url: str) -> None:
    from geppetto.providers.openai_responses import ResponsesEngine
    from geppetto.session.stores import open_store

    store = open_store(target)
    try:
        engine = ResponsesEngine("sim-1", api_key="sk-sim", base_url=sim_url)
        await gp.Session(engine, tools=[], store=store, session_id="s1").run("Hi")
    finally:
        store.close()


async def test_an_abandoned_interrupted_inference_is_not_gone_on_with(store: Any) -> None:
    weather, runs = _interrupted_tool(None, False)
    session = gp.Session(FailingOnce(_steps(), fail_at=2), tools=[weather], store=store)
    with pytest.raises(ProviderError):
        await session.run("Weather in Paris?")
    assert session.interrupted is not None
    session.use(ScriptedEngine([gp.Block.llm_text("Hello.")]))
    session.prompt("Never mind, hi")  # a new turn instead: the interrupted inference is abandoned
    assert session.interrupted is None
    await session.start_inference().wait()
    assert await store.journal_read(session.session_id) == []
    restored = await gp.Session.restore(ScriptedEngine([]), store, session.session_id, tools=[weather])
    assert restored.interrupted is None
    assert runs == ["Paris"]


async def test_a_journal_written_against_another_snapshot_is_not_gone_on_with(store: Any) -> None:
    weather, _ = _interrupted_tool(None, False)
    session = gp.Session(FailingOnce(_steps(), fail_at=2), tools=[weather], store=store)
    with pytest.raises(ProviderError):
        await session.run("Weather in Paris?")
    rows = await store.journal_read(session.session_id)
    # another writer saved a snapshot after this journal was written: it no longer describes the session
    await store.save_snapshot(session.session_id, gp.Turn([gp.Block.user("elsewhere")]))
    restored = await gp.Session.restore(ScriptedEngine([]), store, session.session_id, tools=[weather])
    assert rows and restored.interrupted is None


async def test_a_turn_that_does_not_start_with_the_stored_snapshot_is_rebuilt_from_its_block_order(store: Any) -> None:
    from geppetto.middleware import system_prompt

    weather, runs = _interrupted_tool(None, False)
    first = gp.Session(ScriptedEngine([gp.Block.llm_text("Hello.")]), tools=[weather], store=store)
    await first.run("Hi")
    sid = first.session_id
    # the next process puts a system prompt first: the Turn no longer starts with the stored snapshot
    brief = [system_prompt("Be brief.")]
    second = await gp.Session.restore(FailingOnce(_steps(), fail_at=2), store, sid, tools=[weather], middlewares=brief)
    with pytest.raises(ProviderError):
        await second.run("Weather in Paris?")
    [step] = [r for r in await store.journal_read(sid) if r.entry.startswith("step:")]
    assert "order" in step.record and "prefix" not in step.record
    assert len(step.record["blocks"]) == 4, "the system prompt, the prompt and the step: not the stored blocks"
    third = await gp.Session.restore(
        FailingOnce(_steps()[1:], fail_at=0), store, sid, tools=[weather], middlewares=brief
    )
    assert third.interrupted is not None
    out = await third.resume()
    assert runs == ["Paris"]
    assert [(b.kind.value, b.text or b.payload.get("result")) for b in out.blocks] == [
        ("system", "Be brief."),
        ("user", "Hi"),
        ("llm_text", "Hello."),
        ("user", "Weather in Paris?"),
        ("llm_text", "Let me look."),
        ("tool_call", None),
        ("tool_use", "sunny in Paris"),
        ("llm_text", "It is sunny in Paris."),
    ]
