"""Sinks carried in a contextvar, best-effort publishing, an in-process router and printers."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import IO, Any

from .._exceptions import UsageError
from ..turns import result_text
from ._types import (
    Event,
    EventBuiltinTool,
    EventError,
    EventFinal,
    EventReasoningDelta,
    EventTextDelta,
    EventToolCallRequested,
    EventToolResult,
)

__all__ = [
    "EventRouter",
    "EventSink",
    "JsonLinesPrinter",
    "TextPrinter",
    "add_global_sink",
    "check_sink",
    "current_sinks",
    "publish",
    "with_sinks",
]

log = logging.getLogger("geppetto.events")

EventSink = Callable[[Event], None]
_SINKS: contextvars.ContextVar[tuple[EventSink, ...]] = contextvars.ContextVar("geppetto_sinks", default=())


_GLOBAL: tuple[EventSink, ...] = ()
"""Sinks that see every event in the process (instrumentation such as OpenTelemetry), after the context's."""


def check_sink(sink: object, where: str = "a sink") -> EventSink:
    """``sink`` when it is a callable taking one event; else a :class:`~geppetto.UsageError` naming the shape
    (``where`` says where it was given, e.g. ``"Session(sinks=...)"``)."""
    if callable(sink):
        # inspect.signature costs ~20x a with_sinks block: a shape seen before (the same code, bound or
        # not, or the same class of callable object) is not inspected again
        shape = _shape(sink)
        if shape is not None and shape in _FITTING:
            return sink
        try:
            signature = inspect.signature(sink)
        except (TypeError, ValueError):  # a builtin without a signature: taken on trust
            return sink
        try:
            signature.bind(None)
        except TypeError:
            raise UsageError(
                f"{where}: {_named(sink)} takes {_params(signature)}, but a sink is called with one event; "
                "write it as `def sink(event): ...`"
            ) from None
        if shape is not None and len(_FITTING) < 4096:
            _FITTING.add(shape)
        return sink
    hint = ""
    if callable(getattr(sink, "publish", None)):
        hint = (
            f"; an object with a `publish` method is not one: pass a function that calls it "
            f"(lambda event: {type(sink).__name__.lower()}.publish(...)), or for an EventRouter router.sink(topic)"
        )
    raise UsageError(
        f"{where}: a sink is a callable taking one event (`def sink(event): ...`), got {_named(sink)}{hint}"
    )


_FITTING: set[object] = set()
"""Shapes of sinks found to take one event (see :func:`_shape`)."""


def _shape(sink: object) -> object:
    """What decides whether ``sink`` takes one event: a function's code (with its defaults count), a bound
    method's the same and that it is bound, a callable object's class; None for anything else."""
    func = getattr(sink, "__func__", sink)
    code = getattr(func, "__code__", None)
    if code is not None:
        return (code, len(getattr(func, "__defaults__", None) or ()), func is not sink)
    # a class's own `def __call__` (a partial's is a slot of its type, and differs per instance)
    if inspect.isfunction(inspect.getattr_static(type(sink), "__call__", None)):
        return type(sink)
    return None


def _named(value: object) -> str:
    name = getattr(value, "__qualname__", None)
    return f"{name}()" if isinstance(name, str) and callable(value) else f"a {type(value).__name__}"


def _params(signature: inspect.Signature) -> str:
    names = [p.name for p in signature.parameters.values()]
    return f"({', '.join(names)})" if names else "no arguments"


def current_sinks() -> tuple[EventSink, ...]:
    return _SINKS.get()


def add_global_sink(sink: EventSink) -> Callable[[], None]:
    """Hand every event of the process to ``sink`` (after the sinks in context); returns the function that
    removes it again. Raises :class:`~geppetto.UsageError` for anything but a callable taking one event."""
    global _GLOBAL
    check_sink(sink, "add_global_sink")
    _GLOBAL = (*_GLOBAL, sink)

    def remove() -> None:
        global _GLOBAL
        _GLOBAL = tuple(s for s in _GLOBAL if s is not sink)

    return remove


@contextlib.contextmanager
def with_sinks(*sinks: EventSink) -> Iterator[None]:
    """Add ``sinks`` for the code inside the block (and the tasks it starts). Raises
    :class:`~geppetto.UsageError` for anything but a callable taking one event."""
    for sink in sinks:
        check_sink(sink, "with_sinks")
    token = _SINKS.set(_SINKS.get() + sinks)
    try:
        yield
    finally:
        _SINKS.reset(token)


def publish(event: Event) -> None:
    """Hand ``event`` to every sink in context, then to the global ones. A sink that raises is logged and
    skipped."""
    for sinks in (_SINKS.get(), _GLOBAL):
        for sink in sinks:
            try:
                sink(event)
            except Exception:
                log.exception("event sink %r failed on a %s event; the inference goes on", sink, event.type)


Subscriber = Callable[[Event], Awaitable[None]]


class EventRouter:
    """In-process pub/sub: events published to a topic reach every async subscriber of that topic.

    ``router.sink(topic)`` is a sink for :func:`with_sinks`; each subscriber gets its own queue and task,
    so a slow or failing subscriber never blocks the inference. ``await router.close()`` drains them.

    Publishing is thread-safe: sync tools run in worker threads with the caller's sinks, so an event
    published off the subscriber's event loop is handed to that loop with ``call_soon_threadsafe``.
    """

    def __init__(self) -> None:
        self._subs: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Queue[Event | None]]]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def subscribe(self, topic: str, handler: Subscriber) -> None:
        """Call ``handler`` for each event of ``topic``, in a task on the running loop."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._subs.setdefault(topic, []).append((loop, queue))
        self._tasks.append(loop.create_task(self._pump(queue, handler)))

    async def _pump(self, queue: asyncio.Queue[Event | None], handler: Subscriber) -> None:
        while (event := await queue.get()) is not None:
            try:
                await handler(event)
            except Exception:
                log.exception("subscriber %r failed on a %s event", handler, event.type)

    def publish(self, topic: str, event: Event) -> None:
        """Queue ``event`` for every subscriber of ``topic``; callable from any thread."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None  # a worker thread
        for loop, queue in tuple(self._subs.get(topic, ())):
            if loop is running:
                queue.put_nowait(event)
            else:  # asyncio.Queue is not thread-safe: its loop must do the put
                loop.call_soon_threadsafe(queue.put_nowait, event)

    def sink(self, topic: str) -> EventSink:
        return lambda event: self.publish(topic, event)

    async def close(self) -> None:
        """Let every subscriber finish the events queued so far (those published from threads
        included), then stop their tasks."""
        for queues in self._subs.values():
            for loop, queue in queues:
                # behind any put a thread scheduled before this call
                loop.call_soon_threadsafe(queue.put_nowait, None)
        await asyncio.gather(*self._tasks)
        self._subs.clear()
        self._tasks.clear()


class TextPrinter:
    """Prints text as it streams, and tool calls, results and errors as one line each.

    Each line-shaped item starts on a line of its own, and no empty line is left between them: the printer
    remembers whether the last thing it wrote ended a line (a prompt such as ``assistant> `` printed before
    it by the caller counts as a line start, so a first tool call follows it on the same line)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stdout
        self._line_start = True

    def _write(self, text: str) -> None:
        if text:
            self.stream.write(text)
            self._line_start = text.endswith("\n")

    def _line(self, text: str) -> None:
        self._write(("" if self._line_start else "\n") + text)

    def __call__(self, event: Event) -> None:
        if isinstance(event, EventTextDelta):
            self._write(event.delta)
        elif isinstance(event, EventReasoningDelta):
            return
        elif isinstance(event, EventToolCallRequested):
            self._line(f"→ {event.name}({json.dumps(event.args, ensure_ascii=False)})\n")
        elif isinstance(event, EventBuiltinTool):
            self._line(_builtin_line(event))
        elif isinstance(event, EventToolResult):
            shown = event.error if event.error is not None else result_text(event.result)
            self._line(f"← {event.name}: {'error: ' if event.error is not None else ''}{shown}\n")
        elif isinstance(event, EventFinal):
            if not self._line_start:
                self._write("\n")
            self._line_start = True  # the next answer (another prompt) starts a line of its own
        elif isinstance(event, EventError):
            self._line(f"error: {event.message}\n")
        else:
            return
        self.stream.flush()


def _builtin_line(event: EventBuiltinTool) -> str:
    """``⚙ web_search({"query": ...})`` for a built-in call, ``⚙ web_search: 5 sources`` for its result."""
    if event.phase == "call":
        shown = "" if event.input is None else json.dumps(event.input, ensure_ascii=False)
        return f"⚙ {event.tool}({shown[:200]})\n"
    if event.error:
        return f"⚙ {event.tool}: error\n"
    if event.sources:
        return f"⚙ {event.tool}: {len(event.sources)} sources\n"
    return f"⚙ {event.tool}: done\n"


class JsonLinesPrinter:
    """Writes every event as one JSON object per line."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stdout

    def __call__(self, event: Event) -> None:
        self.stream.write(json.dumps(event.to_dict(), ensure_ascii=False, default=_default) + "\n")
        self.stream.flush()


def _default(value: Any) -> Any:
    return str(value)
