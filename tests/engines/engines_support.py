"""Helpers for the engine tests: stream fixtures, reducer runs and block shapes.

``fixtures/captured/`` holds streams captured from the real services by public projects, each stored
byte-for-byte after a ``#`` header naming the repository, path and commit it came from (``format: sse`` is
the raw event stream; ``format: jsonl`` is one ``data:`` payload a line, as that project records them).
``fixtures/synthetic/`` holds streams written by hand for cases no capture covers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geppetto.providers._sse import SSEDecoder, SSEEvent
from geppetto.providers._stream_loop import Delta, StreamReducer, StreamResult
from geppetto.turns import BLOCK_META_PROVIDER, Block

FIXTURES = Path(__file__).parent / "fixtures"
CAPTURED = FIXTURES / "captured"
SYNTHETIC = FIXTURES / "synthetic"
HEADER_END = "# ---\n"


@dataclass(frozen=True)
class Capture:
    """A captured stream: its header fields and the captured text, exactly as the source stored it."""

    meta: dict[str, str]
    body: str

    def sse(self) -> str:
        """The capture as an event stream (a ``jsonl`` capture gets one ``data:`` event per line)."""
        if self.meta["format"] == "sse":
            return self.body
        return "".join(f"data: {line}\n\n" for line in self.body.splitlines() if line)


def captured(name: str) -> Capture:
    raw = (CAPTURED / name).read_bytes().decode()
    header, _, body = raw.partition(HEADER_END)
    meta: dict[str, str] = {}
    for line in header.splitlines():
        key, _, value = line.removeprefix("# ").partition(": ")
        meta[key] = f"{meta[key]}\n{value}" if key in meta else value
    return Capture(meta, body)


def stream_text(name: str) -> str:
    """The SSE text of a fixture: a capture (``captured/``) or a synthetic stream (``synthetic/``)."""
    if (CAPTURED / name).exists():
        return captured(name).sse()
    return (SYNTHETIC / name).read_text()


def sse_events(text: str | bytes, chunk: int = 0) -> list[SSEEvent]:
    """The SSE events of a recorded stream, parsed as the engines parse a response body (``SSEDecoder``),
    whole or in pieces of ``chunk`` bytes (``:`` comment lines are skipped, as the spec says)."""
    body = text.encode() if isinstance(text, str) else text
    size = chunk or max(1, len(body))
    decoder = SSEDecoder()
    events = [event for i in range(0, len(body), size) for event in decoder.feed(body[i : i + size])]
    return events + decoder.flush()


def fixture_events(name: str) -> list[SSEEvent]:
    return sse_events(stream_text(name))


def reduce(reducer: StreamReducer, events: list[SSEEvent]) -> tuple[list[Delta], StreamResult]:
    """Feed every event (stopping at the terminal one like the engine loop) and return deltas and result."""
    deltas: list[Delta] = []
    for event in events:
        deltas.extend(reducer.feed(event))
        if reducer.finished:
            break
    return deltas, reducer.result()


def shape(blocks: list[Block]) -> list[tuple[str, dict[str, Any]]]:
    """Blocks as (kind, payload): what a test can compare when block ids are random."""
    return [(b.kind.value, b.payload) for b in blocks]


def from_provider(block: Block, provider: str) -> Block:
    """``block`` marked as produced by ``provider``'s engine."""
    BLOCK_META_PROVIDER.set(block.metadata, provider)
    return block


def consume(value: Any) -> Any:
    """Walk a pydantic-validated value, draining the lazy iterators it makes for ``Iterable`` fields so
    their items are validated too; returns plain lists and dicts."""
    if isinstance(value, dict):
        return {k: consume(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [consume(v) for v in value]
    if hasattr(value, "__next__"):
        return [consume(v) for v in value]
    return value
