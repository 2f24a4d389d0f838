"""What the commands show only on a terminal: the wait indicator before the first token, and the prompt
of ``chat`` (neither is ever written into a pipe or a file)."""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
from collections.abc import Awaitable
from typing import IO, Any, TypeVar

from ..events import Event, EventStart

__all__ = ["START_ONE", "Spinner", "read_line", "spinning"]

T = TypeVar("T")

START_ONE = "start one with `geppetto chat` (add --profile sim to run offline)"


def _tty(stream: Any) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


class Spinner:
    """Until the first event that prints something, an elapsed-time indicator after ``prefix`` on ``out``
    when ``out`` is a terminal (nothing otherwise). The event sink clears it before the first text."""

    FRAMES = "|/-\\"

    def __init__(self, out: IO[str], prefix: str = "", label: str = "") -> None:
        self.out, self.prefix, self.label = out, prefix, label
        self.enabled = _tty(out)
        self.waiting = False
        self.width = 0

    async def run(self) -> None:
        self.waiting = True
        start = time.monotonic()
        for tick in itertools.count():
            await asyncio.sleep(0.25)
            elapsed = time.monotonic() - start
            if not self.waiting:
                return
            if elapsed >= 1:
                text = f"{self.FRAMES[tick % 4]} {elapsed:.0f}s{self.label}"
                self.out.write(f"\r{self.prefix}{text}")
                self.out.flush()
                self.width = len(text)

    def sink(self, event: Event) -> None:
        if self.waiting and not isinstance(event, EventStart):
            self.stop()

    def stop(self) -> None:
        self.waiting = False
        if self.width:
            self.out.write(f"\r{self.prefix}{' ' * self.width}\r{self.prefix}")
            self.out.flush()
            self.width = 0


async def spinning(spinner: Spinner, work: Awaitable[T]) -> T:
    """Await ``work`` with ``spinner`` showing until its first event (or the end)."""
    if not spinner.enabled:
        return await work
    ticking = asyncio.ensure_future(spinner.run())
    try:
        return await work
    finally:
        spinner.stop()
        ticking.cancel()


def read_line(prompt: str) -> str:
    """A line of input, stripped. The prompt goes to a terminal only: stdout when both ends are one,
    stderr when only stdin is (stdout is a file), nowhere when the input is piped in."""
    if not _tty(sys.stdin):
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.strip()
    if _tty(sys.stdout):
        return input(prompt).strip()
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return input().strip()
