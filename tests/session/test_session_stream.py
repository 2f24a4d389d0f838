"""Session.stream, stream_text and stream_output on all four engines against the simulator."""

from __future__ import annotations

import asyncio
import gc
from typing import Any, Literal

import pydantic
import pytest

from geppetto import BadRequestError, Session, output_of
from geppetto.events import (
    EventError,
    EventFinal,
    EventStart,
    EventTextDelta,
    EventToolCallRequested,
    EventToolResult,
)
from geppetto.session import MemoryTurnStore
from geppetto.simulator import Reply, Simulator
from geppetto.turns import BlockKind
from sim_engines import PROVIDERS, engine


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C and sunny in {city}"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_stream_gives_the_events_in_order_with_the_final_last_and_sets_latest(
    geppetto_sim: Simulator, provider: str
) -> None:
    geppetto_sim.queue(Reply(text="Hello there, streaming reader"))
    async with engine(geppetto_sim, provider) as eng:
        store = MemoryTurnStore()
        session = Session(eng, store=store)
        events = [e async for e in session.stream("hi")]
        assert not session.running
    assert isinstance(events[-1], EventFinal)
    kinds = [type(e) for e in events]
    if EventStart in kinds:
        assert kinds.index(EventStart) < kinds.index(EventTextDelta)
    text = "".join(e.delta for e in events if isinstance(e, EventTextDelta))
    assert text == "Hello there, streaming reader" == events[-1].text
    assert session.latest is not None and session.latest.blocks[-1].text == text
    assert (await store.load_session(session.session_id))[-1].blocks[-1].text == text
    assert {e.metadata.session_id for e in events} == {session.session_id}


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_stream_runs_the_tool_loop_and_ends_with_the_last_requests_final(
    geppetto_sim: Simulator, provider: str
) -> None:
    model = {"anthropic": "claude-opus-4-6", "gemini": "gemini-3-pro-preview"}.get(provider, "sim-1")
    async with engine(geppetto_sim, provider, model=model) as eng:
        session = Session(eng, tools=[get_weather])
        events = [e async for e in session.stream("What is the weather in Paris?")]
    kinds = [type(e) for e in events]
    assert kinds.index(EventToolCallRequested) < kinds.index(EventToolResult) < len(kinds) - 1
    assert sum(k is EventFinal for k in kinds) == 2 and kinds[-1] is EventFinal
    assert session.latest is not None
    assert [b.kind for b in session.latest.blocks][-1] is BlockKind.LLM_TEXT


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_stream_text_gives_the_text_alone(geppetto_sim: Simulator, provider: str) -> None:
    geppetto_sim.queue(Reply(text="one two three four"))
    async with engine(geppetto_sim, provider) as eng:
        session = Session(eng)
        pieces = [piece async for piece in session.stream_text("count")]
    assert len(pieces) > 1 and all(isinstance(p, str) and p for p in pieces)
    assert "".join(pieces) == "one two three four"
    assert session.latest is not None and session.latest.blocks[-1].text == "one two three four"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_breaking_out_cancels_the_inference_and_the_session_is_usable_again(
    geppetto_sim: Simulator, provider: str
) -> None:
    geppetto_sim.queue(Reply(text="word " * 400), Reply(text="second answer"))
    geppetto_sim.fail_next(stall_after=6, stall_seconds=30)  # still streaming when the loop is left
    async with engine(geppetto_sim, provider) as eng:
        store = MemoryTurnStore()
        session = Session(eng, store=store)
        async for event in session.stream("talk a lot"):
            if isinstance(event, EventTextDelta):
                break
        # the next run waits for the stopped inference to unwind, then runs
        turn = await session.run("again")
        assert turn.blocks[-1].text == "second answer"
        saved = await store.load_session(session.session_id)
    assert [t.blocks[-1].text for t in saved] == ["second answer"]  # nothing of the stopped one was saved
    assert not any(t.blocks[-1].text.startswith("word") for t in session.history)


async def test_aclose_stops_the_inference_at_once(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="word " * 400))
    geppetto_sim.fail_next(stall_after=6, stall_seconds=30, times=2)
    async with engine(geppetto_sim, "openai-responses") as eng:
        session = Session(eng)
        stream = session.stream("talk a lot")
        async for event in stream:
            if isinstance(event, EventTextDelta):
                await stream.aclose()
        assert not session.running
        assert stream.handle is not None and not stream.handle.running
        assert session.latest is not None and session.latest.blocks[-1].kind is BlockKind.USER
        async with session.stream("again") as events:
            async for _ in events:
                break
        assert not session.running  # leaving the block stopped it


async def test_a_cancelled_consumer_cancels_the_inference(geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(stall_after=6, stall_seconds=30, times=2)
    geppetto_sim.queue(Reply(text="word " * 100), Reply(text="word " * 100), Reply(text="after"))
    async with engine(geppetto_sim, "openai-responses") as eng:
        session = Session(eng)
        streaming = asyncio.Event()

        async def consume_in_block() -> None:
            async with session.stream("talk a lot") as events:
                async for event in events:
                    if isinstance(event, EventTextDelta):
                        streaming.set()
                    await asyncio.sleep(0.01)

        async def consume() -> None:
            async for event in session.stream("talk a lot"):
                if isinstance(event, EventTextDelta):
                    streaming.set()
                await asyncio.sleep(0.01)

        for consumer in (consume_in_block, consume):
            streaming.clear()
            task = asyncio.create_task(consumer())
            await asyncio.wait_for(streaming.wait(), 10)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            if consumer is consume_in_block:
                assert not session.running  # the block waited for the inference to stop
        del task
        gc.collect()
        # the dropped stream asked the inference to stop: the next run waits for it, not for the stall
        turn = await asyncio.wait_for(session.run("again"), 10)
        assert turn.blocks[-1].text == "after"


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_failing_inference_raises_from_the_loop_after_its_error_event(
    geppetto_sim: Simulator, provider: str
) -> None:
    geppetto_sim.fail_next(400)
    async with engine(geppetto_sim, provider) as eng:
        session = Session(eng)
        seen: list[Any] = []
        with pytest.raises(BadRequestError):
            async for event in session.stream("hi"):
                seen.append(event)
        assert isinstance(seen[-1], EventError)
        assert not session.running


class City(pydantic.BaseModel):
    name: str
    population: int
    kind: Literal["capital", "town"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_stream_output_gives_partial_values_as_the_json_arrives(geppetto_sim: Simulator, provider: str) -> None:
    geppetto_sim.queue(Reply(text='{"name": "Paris", "population": 2100000, "kind": "capital"}'))
    async with engine(geppetto_sim, provider) as eng:
        session = Session(eng)
        partials = [p async for p in session.stream_output("Describe Paris, a capital of 2100000 people", City)]
        assert session.latest is not None
        city = output_of(session.latest, City)
    assert city.name == "Paris" and city.population == 2100000
    assert len(partials) > 1 and all(isinstance(p, dict) for p in partials)
    assert partials[-1]["name"] == "Paris" and partials[-1]["population"] == 2100000
    assert any("population" not in p for p in partials)  # the value grew key by key


async def test_stream_with_output_asks_for_the_schema(geppetto_sim: Simulator) -> None:
    async with engine(geppetto_sim, "openai-responses") as eng:
        session = Session(eng)
        events = [e async for e in session.stream("Describe Paris, a capital of 2100000 people", output=City)]
        assert session.latest is not None
        assert output_of(session.latest, City).kind == "capital"
        assert isinstance(events[-1], EventFinal)
        again = [e async for e in session.stream("plain now")]
        assert again[-1].text.startswith("You said")  # type: ignore[attr-defined]


@pytest.mark.parametrize("helper", ["stream_text", "stream_output"])
async def test_breaking_out_of_the_helpers_stops_the_inference_too(geppetto_sim: Simulator, helper: str) -> None:
    geppetto_sim.queue(Reply(text='{"name": "Paris", "population": 2100000, "kind": "capital"}'), Reply(text="next"))
    geppetto_sim.fail_next(stall_after=8, stall_seconds=30)
    async with engine(geppetto_sim, "anthropic") as eng:
        session = Session(eng)
        items = session.stream_text("talk") if helper == "stream_text" else session.stream_output("talk", City)
        async for _ in items:
            break
        del items
        turn = await asyncio.wait_for(session.run("again"), 10)  # not busy, and not waiting for the stall
    assert turn.blocks[-1].text == "next"


async def test_a_call_waiting_for_approval_ends_the_stream_with_approval_requested(geppetto_sim: Simulator) -> None:
    from geppetto.events import EventApprovalRequested
    from geppetto.simulator import ToolCall

    geppetto_sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]))
    async with engine(geppetto_sim, "openai-chat") as eng:
        session = Session(eng, tools=[get_weather], approval=True)
        events = [e async for e in session.stream("weather?")]
    assert isinstance(events[-1], EventApprovalRequested)
    assert [c.name for c in session.pending_approvals] == ["get_weather"]


async def test_prompting_while_a_dropped_stream_stops_says_what_to_do(geppetto_sim: Simulator) -> None:
    from geppetto import SessionBusyError

    geppetto_sim.fail_next(stall_after=6, stall_seconds=30)
    geppetto_sim.queue(Reply(text="word " * 100))
    async with engine(geppetto_sim, "openai-responses") as eng:
        session = Session(eng)
        async for event in session.stream("talk"):
            if isinstance(event, EventTextDelta):
                break
        with pytest.raises(SessionBusyError, match=r"still stopping \(a stream left with break\); session.run"):
            session.prompt("now")
        await session.run("then")  # waits for it


async def test_a_stream_that_cannot_start_raises_once_and_ends(geppetto_sim: Simulator) -> None:
    from geppetto import SessionBusyError, UsageError

    async with engine(geppetto_sim, "openai-responses") as eng:
        session = Session(eng)
        handle_stream = session.stream("first")
        async with handle_stream:
            stream = session.stream("second while the first runs")
            with pytest.raises(SessionBusyError):
                await stream.__anext__()
            assert [e async for e in stream] == []  # ended, not half-started
        with pytest.raises(UsageError, match="pass output=Model too"):
            async for _ in session.stream("x", validators=[print]):
                pass
