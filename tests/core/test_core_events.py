"""Events: sinks in context, failure isolation, the router, printers, to_dict."""

from __future__ import annotations

import asyncio
import io
import logging

import pytest

import geppetto as gp
from geppetto.events import (
    STOP_END,
    STOP_TOOL_CALLS,
    Event,
    EventError,
    EventFinal,
    EventInterrupt,
    EventLog,
    EventMetadata,
    EventReasoningDelta,
    EventRouter,
    EventStart,
    EventTextDelta,
    EventToolCallRequested,
    EventToolCallStarted,
    EventToolResult,
    JsonLinesPrinter,
    TextPrinter,
    Usage,
    current_sinks,
    metadata_for,
    publish,
    with_sinks,
)
from geppetto.testing import FunctionEngine
from geppetto.turns import TURN_META_INFERENCE_ID, TURN_META_SESSION_ID, Block, Turn

META = EventMetadata(session_id="s", inference_id="i", turn_id="t")


def test_event_types() -> None:
    assert [
        cls.type
        for cls in (
            EventStart,
            EventTextDelta,
            EventReasoningDelta,
            EventToolCallRequested,
            EventToolCallStarted,
            EventToolResult,
            EventFinal,
            EventError,
            EventInterrupt,
            EventLog,
        )
    ] == [
        "start",
        "text_delta",
        "reasoning_delta",
        "tool_call",
        "tool_call_started",
        "tool_result",
        "final",
        "error",
        "interrupt",
        "log",
    ]
    assert (STOP_END, STOP_TOOL_CALLS) == ("end_turn", "tool_calls")


def test_event_to_dict() -> None:
    meta = EventMetadata(
        session_id="s",
        provider="openai",
        model="m",
        usage=Usage(input_tokens=5, output_tokens=2),
        stop_reason="end_turn",
    )
    assert EventFinal(meta, text="done").to_dict() == {
        "type": "final",
        "text": "done",
        "metadata": {
            "session_id": "s",
            "provider": "openai",
            "model": "m",
            "usage": {
                "input_tokens": 5,
                "output_tokens": 2,
                "cached_tokens": 0,
                "reasoning_tokens": 0,
                "cache_write_tokens": 0,
            },
            "stop_reason": "end_turn",
        },
    }
    assert EventToolResult(EventMetadata(duration_s=0.0), "c1", "f", {"a": 1}, None).to_dict() == {
        "type": "tool_result",
        "call_id": "c1",
        "name": "f",
        "result": {"a": 1},
        "error": None,
        "metadata": {"duration_s": 0.0},
    }
    assert EventLog(META, "warning", "hm", {"k": [1]}).to_dict() == {
        "type": "log",
        "level": "warning",
        "message": "hm",
        "fields": {"k": [1]},
        "metadata": {"session_id": "s", "inference_id": "i", "turn_id": "t"},
    }


def test_usage_dict_round_trip() -> None:
    usage = Usage(input_tokens=10, output_tokens=3, cached_tokens=4, reasoning_tokens=1, cache_write_tokens=2)
    assert Usage.from_dict(usage.to_dict()) == usage
    assert list(usage.to_dict()) == list(Usage.__dataclass_fields__)  # every field, in order
    assert Usage.from_dict({"input_tokens": "7", "unknown": 1}) == Usage(input_tokens=7)


def test_metadata_for_reads_turn_ids() -> None:
    turn = Turn(id="t-9")
    TURN_META_SESSION_ID.set(turn.metadata, "s-9")
    TURN_META_INFERENCE_ID.set(turn.metadata, "i-9")
    assert metadata_for(turn, provider="p", model="m") == EventMetadata(
        session_id="s-9", inference_id="i-9", turn_id="t-9", provider="p", model="m"
    )
    assert metadata_for(Turn(id="x")) == EventMetadata(turn_id="x")


def test_publish_without_sinks_is_a_no_op() -> None:
    assert current_sinks() == ()
    publish(EventStart(META))  # nothing to receive it; must not raise


def test_with_sinks_nests_and_restores() -> None:
    outer: list[str] = []
    inner: list[str] = []
    with with_sinks(lambda e: outer.append(e.type)):
        publish(EventStart(META))
        with with_sinks(lambda e: inner.append(e.type)):
            assert len(current_sinks()) == 2
            publish(EventTextDelta(META, "x"))
        publish(EventFinal(META, "x"))
    publish(EventError(META, "after"))
    assert outer == ["start", "text_delta", "final"]
    assert inner == ["text_delta"]
    assert current_sinks() == ()


def test_failing_sink_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    got_a: list[Event] = []
    got_b: list[Event] = []

    def broken(event: Event) -> None:
        raise RuntimeError("sink is down")

    event = EventTextDelta(META, "hi")
    with caplog.at_level(logging.ERROR, logger="geppetto.events"), with_sinks(got_a.append, broken, got_b.append):
        publish(event)
        publish(event)
    assert got_a == [event, event]
    assert got_b == [event, event]
    records = [r for r in caplog.records if r.name == "geppetto.events"]
    assert len(records) == 2
    assert "failed on a text_delta event; the inference goes on" in records[0].getMessage()
    assert records[0].exc_info is not None and str(records[0].exc_info[1]) == "sink is down"


def test_failing_sink_never_breaks_an_inference(caplog: pytest.LogCaptureFixture) -> None:
    got: list[str] = []

    def fn(turn: Turn) -> Turn:
        meta = metadata_for(turn)
        publish(EventStart(meta))
        publish(EventTextDelta(meta, "Hello"))
        turn.append(Block.llm_text("Hello"))
        publish(EventFinal(meta, "Hello"))
        return turn

    def broken(event: Event) -> None:
        raise ValueError("boom")

    with caplog.at_level(logging.ERROR, logger="geppetto.events"), with_sinks(broken, lambda e: got.append(e.type)):
        out = gp.run_sync(FunctionEngine(fn), Turn(id="t"))
    assert [b.text for b in out.blocks] == ["Hello"]
    assert got == ["start", "text_delta", "final"]
    assert len([r for r in caplog.records if r.name == "geppetto.events"]) == 3


async def test_sinks_follow_into_tasks() -> None:
    got: list[str] = []

    async def child() -> None:
        publish(EventInterrupt(META, "stop"))

    with with_sinks(lambda e: got.append(e.type)):
        await asyncio.create_task(child())
    assert got == ["interrupt"]


async def test_router_delivers_per_topic_and_close_drains() -> None:
    router = EventRouter()
    chat: list[str] = []
    chat2: list[str] = []
    audit: list[str] = []

    async def slow(event: Event) -> None:
        await asyncio.sleep(0)
        chat.append(event.type)

    async def failing(event: Event) -> None:
        raise RuntimeError("subscriber down")

    async def record(event: Event) -> None:
        chat2.append(event.type)

    async def audit_sub(event: Event) -> None:
        audit.append(event.type)

    router.subscribe("chat", slow)
    router.subscribe("chat", failing)
    router.subscribe("chat", record)
    router.subscribe("audit", audit_sub)
    with with_sinks(router.sink("chat")):
        publish(EventStart(META))
        publish(EventTextDelta(META, "a"))
        publish(EventFinal(META, "a"))
    router.publish("audit", EventLog(META, "info", "x", {}))
    router.publish("nobody", EventLog(META, "info", "y", {}))
    await router.close()
    assert chat == ["start", "text_delta", "final"]
    assert chat2 == ["start", "text_delta", "final"]
    assert audit == ["log"]


async def test_router_takes_events_published_from_worker_threads(caplog: pytest.LogCaptureFixture) -> None:
    """Sync tools run in worker threads with the caller's sinks; asyncio's debug mode refuses a queue put
    from another thread, and without the hand-over the subscriber never wakes and close() hangs."""
    loop = asyncio.get_running_loop()
    loop.set_debug(True)
    router = EventRouter()
    got: list[str] = []
    started, arrived = asyncio.Event(), asyncio.Event()

    async def record(event: Event) -> None:
        got.append(event.type if not isinstance(event, EventTextDelta) else event.delta)
        started.set()
        if len(got) == 3:
            arrived.set()

    def in_a_thread() -> None:
        publish(EventTextDelta(META, "from a thread"))
        publish(EventLog(META, "info", "still a thread", {}))

    try:
        router.subscribe("t", record)
        with caplog.at_level(logging.ERROR, logger="geppetto.events"), with_sinks(router.sink("t")):
            publish(EventStart(META))
            await asyncio.wait_for(started.wait(), timeout=60)  # the subscriber now waits on its queue
            await asyncio.to_thread(in_a_thread)
        # bounds, not timings: a regression fails here instead of hanging the suite
        await asyncio.wait_for(arrived.wait(), timeout=60)
        await asyncio.wait_for(router.close(), timeout=60)
    finally:
        loop.set_debug(False)
    assert got == ["start", "from a thread", "log"]
    assert [r.getMessage() for r in caplog.records if r.name == "geppetto.events"] == []


async def test_router_close_delivers_events_a_thread_published_before_it() -> None:
    router = EventRouter()
    got: list[str] = []

    async def record(event: Event) -> None:
        got.append(event.type)

    router.subscribe("t", record)
    await asyncio.sleep(0)  # the subscriber waits on its queue
    await asyncio.to_thread(router.publish, "t", EventFinal(META, "x"))
    await asyncio.wait_for(router.close(), timeout=60)
    assert got == ["final"]


def test_text_printer_output() -> None:
    out = io.StringIO()
    printer = TextPrinter(out)
    for event in [
        EventStart(META),
        EventReasoningDelta(META, "hidden"),
        EventTextDelta(META, "Hel"),
        EventTextDelta(META, "lo"),
        EventToolCallRequested(META, "c1", "get_weather", {"city": "Zürich"}),
        EventToolCallStarted(META, "c1", "get_weather"),
        EventToolResult(META, "c1", "get_weather", {"temp": 3}, None),
        EventToolResult(META, "c2", "broken", None, "bad args"),
        EventLog(META, "info", "quiet", {}),
        EventError(META, "rate limited"),
        EventFinal(META, "Hello"),
    ]:
        printer(event)
    # Each line-shaped item on a line of its own, with no empty line between them.
    assert out.getvalue() == (
        "Hello"
        '\n→ get_weather({"city": "Zürich"})\n'
        '← get_weather: {"temp": 3}\n'
        "← broken: error: bad args\n"
        "error: rate limited\n"
    )


class _Thing:
    def __str__(self) -> str:
        return "a thing"


def test_json_lines_printer_output() -> None:
    out = io.StringIO()
    printer = JsonLinesPrinter(out)
    printer(EventTextDelta(META, "héllo"))
    printer(EventToolResult(EventMetadata(), "c1", "f", {"obj": _Thing()}, None))
    assert out.getvalue() == (
        '{"type": "text_delta", "delta": "héllo", "metadata": {"session_id": "s", "inference_id": "i", "turn_id": "t"}}\n'
        '{"type": "tool_result", "call_id": "c1", "name": "f", "result": {"obj": "a thing"}, "error": null, "metadata": {}}\n'
    )
