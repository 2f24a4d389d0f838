"""Decoding server-sent event streams: :class:`SSEDecoder` (bytes or lines to :class:`SSEEvent`), bounded in
size, and the message of an event whose data did not parse."""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

from geppetto._json import JSONTooDeep, parse_json

__all__ = ["DEFAULT_MAX_EVENT_SIZE", "EventTooLarge", "SSEDecoder", "SSEEvent", "iter_sse", "malformed"]


def malformed(what: str, data: str, exc: ValueError) -> str:
    """The message of a stream error for ``data`` that did not parse: too deep says so and how deep; other
    malformed data is quoted (its first 200 characters) so the provider's mistake can be seen."""
    if isinstance(exc, JSONTooDeep):
        return f"{what} refused: {exc}"
    return f"malformed {what} {data[:200]!r}"


@dataclass(frozen=True)
class SSEEvent:
    """One server-sent event: its ``event`` name ("" when absent), joined ``data`` and optional ``id``."""

    event: str
    data: str
    id: str | None = None

    def json(self) -> Any:
        """The data parsed as JSON; raises ValueError when it is not JSON."""
        return parse_json(self.data)


_LINE_END = re.compile(r"\r\n|\r|\n")


DEFAULT_MAX_EVENT_SIZE = 64 << 20
"""The largest one SSE event may be, in characters of its text (64 Mi: 64 MiB of ASCII)."""


class EventTooLarge(ValueError):
    """One SSE event grew past the decoder's ``max_event_size``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"one event grew past {limit:,} characters (max_event_size)")


class SSEDecoder:
    """An incremental SSE parser: ``feed`` it a stream's bytes as they arrive and it returns the events
    completed so far; ``flush`` at the end of the stream.

    Fields are ``event:``, ``data:`` and ``id:``; multi-line data is joined by ``\\n``; a blank line ends
    an event, ``:`` lines are comments, events without data are dropped (the SSE spec), and so is a
    leading byte-order mark. Lines end in CRLF, LF or CR only, as the spec says: httpx's ``aiter_lines``
    splits like ``str.splitlines``, which also breaks at U+2028, U+2029, U+0085 and a few control
    characters, all valid unescaped inside a JSON string, so a model's text holding one would cut an
    event's data in two. At the end of the stream an unterminated event is still delivered.

    A line that arrives in many chunks is kept as a list of pieces and joined once when it ends, so one
    long event costs time linear in its size. An event whose text (its unfinished line and its data lines)
    grows past ``max_event_size`` characters raises :class:`EventTooLarge` instead of holding more.
    """

    def __init__(self, max_event_size: int = DEFAULT_MAX_EVENT_SIZE) -> None:
        self.max_event_size = max_event_size
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._partial: list[str] = []  # the pieces of a line whose end has not arrived
        self._partial_size = 0
        self._after_cr = False  # the last chunk ended in CR: an LF first in the next one ends no line
        self._started = False
        self._event = ""
        self._id: str | None = None
        self._data: list[str] = []
        self._data_size = 0

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events that ``chunk`` completes."""
        return self._text(self._utf8.decode(chunk))

    def flush(self) -> list[SSEEvent]:
        """The end of the stream: what the last bytes complete, then the last event if it lacked its blank line."""
        out = self._text(self._utf8.decode(b"", final=True))
        if self._partial:
            event = self.line("".join(self._partial))
            self._partial, self._partial_size = [], 0
            if event is not None:
                out.append(event)
        if self._data:
            out.append(SSEEvent(self._event, "\n".join(self._data), self._id))
        self._event, self._data, self._id, self._data_size = "", [], None, 0
        return out

    def _text(self, text: str) -> list[SSEEvent]:
        if not text:
            return []
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._after_cr:
            self._after_cr = False
            text = text.removeprefix("\n")
            if not text:
                return []
        if "\r" in text:
            self._after_cr = text.endswith("\r")
            lines = _LINE_END.split(text)
        else:
            lines = text.split("\n")
        tail = lines.pop()
        if lines and self._partial:
            self._partial.append(lines[0])
            lines[0] = "".join(self._partial)
            self._partial, self._partial_size = [], 0
        out = []
        for line in lines:
            event = self.line(line)
            if event is not None:
                out.append(event)
        if tail:
            self._partial.append(tail)
            self._partial_size += len(tail)
            self._check()
        return out

    def _check(self) -> None:
        if self._partial_size + self._data_size > self.max_event_size:
            self._partial, self._data = [], []  # let go of what was held
            raise EventTooLarge(self.max_event_size)

    def line(self, line: str) -> SSEEvent | None:
        """Take one line (without its line end); the finished event when it is the blank line that ends one."""
        if not line:
            event = SSEEvent(self._event, "\n".join(self._data), self._id) if self._data else None
            self._event, self._data, self._id, self._data_size = "", [], None, 0
            return event
        if line[0] == ":":
            return None
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._data_size += len(value)
            self._check()
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        return None


async def iter_sse(lines: AsyncIterator[str]) -> AsyncGenerator[SSEEvent, None]:
    """The events of a stream given as lines (their line ends are stripped), parsed by :class:`SSEDecoder`."""
    decoder = SSEDecoder()
    async for raw in lines:
        event = decoder.line(raw.rstrip("\r\n"))
        if event is not None:
            yield event
    for event in decoder.flush():
        yield event
