"""Event sinks are checked where they are given: a callable taking one event, else a UsageError naming the shape."""

from __future__ import annotations

import functools
from typing import Any

import pytest

import geppetto as gp
from geppetto.events import EventRouter, TextPrinter, add_global_sink, with_sinks


class Bus:
    """A message bus of the application's, with a publish method (not a sink itself)."""

    def __init__(self) -> None:
        self.got: list[Any] = []

    def publish(self, event: Any) -> None:
        self.got.append(event)


def two(event: Any, extra: Any) -> None: ...


def none() -> None: ...


@pytest.mark.parametrize(
    ("sink", "expected"),
    [
        (
            Bus(),
            "a sink is a callable taking one event (`def sink(event): ...`), got a Bus; an object with a `publish` method is not one",
        ),
        (
            EventRouter(),
            "got a EventRouter; an object with a `publish` method is not one: pass a function that calls it (lambda event: eventrouter.publish(...)), or for an EventRouter router.sink(topic)",
        ),
        ("print", "got a str"),
        (two, "two() takes (event, extra), but a sink is called with one event; write it as `def sink(event): ...`"),
        (none, "none() takes no arguments, but a sink is called with one event"),
        (functools.partial(two, 1, 2), "takes no arguments"),
    ],
)
def test_a_sink_of_the_wrong_shape_is_refused_everywhere(sink: Any, expected: str) -> None:
    for where, give in [
        ("Session(sinks=...)", lambda: gp.Session(gp.ScriptedEngine(), sinks=[sink])),
        ("with_sinks", lambda: with_sinks(sink).__enter__()),
        ("add_global_sink", lambda: add_global_sink(sink)),
    ]:
        with pytest.raises(gp.UsageError) as caught:
            give()
        assert str(caught.value).startswith(f"{where}: ")
        assert expected in str(caught.value)


def test_a_single_sink_not_in_a_list_is_refused() -> None:
    with pytest.raises(gp.UsageError, match=r"takes a list of sinks, e.g. sinks=\[printer\]; got a TextPrinter"):
        gp.Session(gp.ScriptedEngine(), sinks=TextPrinter())  # type: ignore[arg-type]


async def test_callables_taking_one_event_are_accepted_and_called() -> None:
    bus = Bus()
    got: list[Any] = []

    def with_default(event: Any, extra: int = 0) -> None:
        got.append(event)

    router = EventRouter()
    sinks = [
        bus.publish,
        with_default,
        lambda e: got.append(e),
        functools.partial(two, extra=1),
        TextPrinter(),
        router.sink("t"),
    ]
    session = gp.Session(gp.ScriptedEngine([gp.Block.llm_text("hi")]), sinks=sinks)
    await session.run("hello")
    assert bus.got and isinstance(bus.got[-1], gp.events.EventFinal)
    assert len(got) == 2 * len(bus.got)
    with with_sinks(*sinks):  # a second check of the same shapes passes too
        pass
    await router.close()
