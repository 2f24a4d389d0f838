"""Streaming one inference of a session to its caller: :class:`InferenceStream` and the iterators built on it."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Self

from ..events import Event, EventFinal, EventTextDelta, EventToolCallRequested, with_sinks
from ._handle import ExecutionHandle

__all__ = ["InferenceStream", "PartialValues", "TextDeltas"]

_END = object()


class InferenceStream:
    """The events of one inference, as they happen: ``async for event in session.stream(text)``.

    The events are those any sink gets (``geppetto.events``), in the order they were published; for a
    finished inference the last one is the ``final`` event of its last request (``approval_requested``
    when a tool call waits for a person). When the iteration ends the output is ``session.latest``; when
    the inference failed, the loop raises what it raised (after its ``error`` event).

    Leaving early stops the inference: ``await stream.aclose()``, or leave an ``async with`` block around
    the loop; a plain ``break`` asks it to stop at once, and the session's next ``run`` or ``stream`` waits
    until it has. A stopped inference leaves the session as a cancelled one does: the prompt is the latest
    snapshot, no output is saved, and the session can be prompted again.
    """

    def __init__(self, start: Callable[[], Awaitable[ExecutionHandle]]) -> None:
        # start() prompts and starts the inference; the sinks in context then are the inference's
        self._start = start
        self._queue: asyncio.Queue[Any] | None = None
        self._handle: ExecutionHandle | None = None
        self._closed = False
        self._owner = 0

    @property
    def handle(self) -> ExecutionHandle | None:
        """The running inference's handle (None until the first event is asked for)."""
        return self._handle

    def __aiter__(self) -> InferenceStream:
        return self

    async def __aenter__(self) -> InferenceStream:
        await self._begin()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _begin(self) -> None:
        if self._queue is not None:
            return
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        owner = self._owner = threading.get_ident()

        def sink(event: Event) -> None:
            # sync tools publish from worker threads: their events are put on the queue by its own loop
            if threading.get_ident() == owner:
                queue.put_nowait(event)
            else:
                loop.call_soon_threadsafe(queue.put_nowait, event)

        try:
            with with_sinks(sink):
                handle = await self._start()
        except BaseException:
            self._closed = True  # nothing started (the session was busy, say): the iteration is over
            raise
        self._queue, self._handle = queue, handle
        handle._task.add_done_callback(lambda _: queue.put_nowait(_END))

    async def __anext__(self) -> Event:
        if self._closed:
            raise StopAsyncIteration
        try:
            await self._begin()
            assert self._queue is not None and self._handle is not None
            item = await self._queue.get()
        except asyncio.CancelledError:
            await self.aclose()  # the caller was cancelled: so is the inference, before the caller goes on
            raise
        if item is _END:
            self._closed = True
            await self._handle.wait()  # what the inference raised, if it failed
            raise StopAsyncIteration
        event: Event = item
        return event

    async def aclose(self) -> None:
        """Stop the inference (when it still runs) and wait until it has unwound; the iteration ends."""
        self._closed = True
        if self._handle is not None and self._handle.running:
            await self._handle._settle()

    def __del__(self) -> None:
        # a `break` drops the stream: ask the inference to stop now; the session waits for it to unwind
        handle = self._handle
        if handle is None or not handle.running or self._closed:
            return
        if threading.get_ident() == self._owner:
            handle.cancel()
        else:  # collected in another thread: the loop's own thread does the cancel (unless it is closed)
            with contextlib.suppress(RuntimeError):
                handle._task.get_loop().call_soon_threadsafe(handle.cancel)


class _Derived:
    """An iterator over what one :class:`InferenceStream` gives, leaving early as the stream does (a plain
    class, not an async generator: a generator left by ``break`` keeps the stream until the loop gets round
    to closing it, so the session would still be busy on the next line)."""

    def __init__(self, stream: InferenceStream) -> None:
        self._stream = stream

    def __aiter__(self) -> Self:
        return self

    async def __aenter__(self) -> Self:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stream.aclose()

    async def aclose(self) -> None:
        """Stop the inference (when it still runs) and wait until it has unwound."""
        await self._stream.aclose()


class TextDeltas(_Derived):
    """The text of a stream's answers as it arrives (every ``text_delta``)."""

    async def __anext__(self) -> str:
        while True:
            event = await self._stream.__anext__()
            if isinstance(event, EventTextDelta) and event.delta:
                return event.delta


class PartialValues(_Derived):
    """The structured answer of a stream as its JSON arrives: each time the text parsed so far gives a new
    value (a string still open is cut where it has got to), that value, as plain JSON (dicts and lists).
    Text is gathered per request: a tool call or the end of a request starts the next answer afresh."""

    def __init__(self, stream: InferenceStream) -> None:
        super().__init__(stream)
        self._text = ""
        self._last: Any = _END

    async def __anext__(self) -> Any:
        from pydantic_core import from_json

        while True:
            event = await self._stream.__anext__()
            if isinstance(event, EventTextDelta):
                self._text += event.delta
                try:
                    value = from_json(self._text, allow_partial="trailing-strings")
                except ValueError:
                    continue  # not JSON (yet): prose before the answer, say
                if value != self._last:
                    self._last = value
                    return value
            elif isinstance(event, (EventFinal, EventToolCallRequested)):
                self._text, self._last = "", _END
