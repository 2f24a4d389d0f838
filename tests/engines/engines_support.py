"""Helpers for the engine tests: recorded SSE fixtures, reducer runs and block shapes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from geppetto.providers._http import SSEEvent, iter_sse
from geppetto.providers._streaming import Delta, StreamReducer, StreamResult
from geppetto.turns import BLOCK_META_PROVIDER, Block

FIXTURES = Path(__file__).parent / "fixtures"


async def _lines(text: str) -> AsyncIterator[str]:
    for line in text.splitlines():
        yield line


def sse_events(text: str) -> list[SSEEvent]:
    """The SSE events of a recorded stream (``:`` comment lines are skipped, as the spec says)."""

    async def collect() -> list[SSEEvent]:
        return [event async for event in iter_sse(_lines(text))]

    return asyncio.run(collect())


def fixture_events(name: str) -> list[SSEEvent]:
    return sse_events((FIXTURES / name).read_text())


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
