"""The journal of side effects: a tool call whose result is journaled never runs again when an interrupted
inference goes on (``Session.resume``), and one that started without a result follows its tool's
``on_interrupted`` policy; with the in-memory store, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import geppetto as gp
from geppetto import ProviderError
from geppetto.session import MemoryTurnStore
from geppetto.testing import ScriptedEngine
from geppetto.tools._journal import INTERRUPTED_ERROR
from geppetto.turns import TURN_META_INFERENCE_ID


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
    assert [(r.entry, r.record.get("state")) for r in rows] == [("step:000001", None), ("call:call_w", "done")]
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
