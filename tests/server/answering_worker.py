"""``geppetto serve``'s app in a child process with an engine that answers at once (start, two text deltas,
final), for the tests whose subject is the server and the store, not a provider: ``python answering_worker.py
PORT STORE BUS``."""

from __future__ import annotations

import sys

import uvicorn

from geppetto.events import EventFinal, EventStart, EventTextDelta, metadata_for, publish
from geppetto.server import create_app
from geppetto.testing import FunctionEngine
from geppetto.turns import Block, BlockKind, Turn


def answer(turn: Turn) -> None:
    """Answer the last prompt (read from the end: the rest of the Turn is not touched)."""
    asked = next(
        turn.blocks[i].text for i in range(len(turn.blocks) - 1, -1, -1) if turn.blocks[i].kind is BlockKind.USER
    )
    meta = metadata_for(turn, "testing")
    publish(EventStart(meta))
    text = f"You asked: {asked}"
    for part in (text[:5], text[5:]):
        publish(EventTextDelta(meta, part))
    turn.append(Block.llm_text(text))
    publish(EventFinal(meta, text))


def main() -> None:
    port, store, bus = sys.argv[1:4]
    app = create_app(store=store, bus=bus, engine_for=lambda settings: FunctionEngine(answer))
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")


if __name__ == "__main__":
    main()
