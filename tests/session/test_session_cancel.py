"""Cancelling the task that awaits ``session.run()`` cancels the inference, on every engine, whichever way the
caller cancels: ``asyncio.wait_for``, ``task.cancel()`` or ``asyncio.timeout``. The session is idle when the
caller's cancellation arrives, nothing of the cancelled inference is saved, no task error is left for the
event loop to report, and the next prompt works."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import Any

import pytest

import geppetto as gp
from geppetto.events import Event, EventInterrupt
from geppetto.providers._retry import RetryPolicy
from geppetto.session import MemoryTurnStore
from geppetto.simulator import Reply, Simulator

NO_RETRY = RetryPolicy(max_retries=0)
PROVIDERS = ["openai-responses", "openai-chat", "anthropic", "gemini"]


async def _until(condition: Callable[[], object], what: str) -> None:
    for _ in range(3000):  # a bound that stops a hang, not a timing assumption
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


async def _cancel_the_caller(how: str, session: gp.Session, sim: Simulator) -> None:
    """Start ``session.run`` on a stream that stalls, and cancel its caller the way ``how`` says."""
    if how == "wait_for":
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(session.run("Hello?"), 1.0)
    elif how == "timeout":
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.0):
                await session.run("Hello?")
    else:
        task = asyncio.create_task(session.run("Hello?"))
        await _until(lambda: sim.requests, "the request reached the simulator")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()


@pytest.mark.parametrize("how", ["wait_for", "task_cancel", "timeout"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_cancelling_the_caller_cancels_the_inference(provider: str, how: str, geppetto_sim: Simulator) -> None:
    loop_errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: loop_errors.append(context))
    events: list[Event] = []
    store = MemoryTurnStore()
    async with geppetto_sim.engine(provider, retry=NO_RETRY) as engine:
        session = gp.Session(engine, store=store, sinks=[events.append])
        geppetto_sim.fail_next(stall_after=1, stall_seconds=60)
        await _cancel_the_caller(how, session, geppetto_sim)

        assert not session.running  # idle as soon as the caller's cancellation arrives
        assert len(session.history) == 1  # the prompt's seed only: no half inference
        assert await store.load_session(session.session_id) == []
        assert [e.reason for e in events if isinstance(e, EventInterrupt)] == ["cancelled"]

        geppetto_sim.queue(Reply(text="Second answer."))
        out = await session.run("Again?")
        assert out.blocks[-1].text == "Second answer."
        assert [b.text for b in out.blocks if b.kind is gp.BlockKind.USER] == ["Hello?", "Again?"]
    await asyncio.sleep(0)  # let any stray task callback run before checking
    assert loop_errors == []


async def test_a_cancelled_waiter_of_a_handle_cancels_its_inference() -> None:
    started = asyncio.Event()

    async def slow(turn: gp.Turn) -> gp.Turn:
        started.set()
        await asyncio.sleep(3600)
        return turn

    session = gp.Session(gp.testing.FunctionEngine(slow))
    session.prompt("Hi")
    handle = session.start_inference()
    waiter = asyncio.create_task(handle.wait())
    await started.wait()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert not handle.running
    assert not session.running
    with pytest.raises(gp.InferenceCancelled):
        await handle.wait()


async def test_an_inference_that_fails_while_unwinding_leaves_no_unretrieved_error() -> None:
    loop_errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: loop_errors.append(context))
    started = asyncio.Event()

    async def breaks_on_cancel(turn: gp.Turn) -> gp.Turn:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise RuntimeError("the stream failed while closing") from None
        return turn

    session = gp.Session(gp.testing.FunctionEngine(breaks_on_cancel))
    task = asyncio.create_task(session.run("Hi"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not session.running
    del task
    gc.collect()
    await asyncio.sleep(0)
    assert loop_errors == []
