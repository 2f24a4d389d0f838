"""Test doubles for user code: engines that need no network.

``FunctionEngine`` runs a function you write; ``ScriptedEngine`` appends queued blocks, one step per
call. Both publish :class:`~geppetto.events.EventToolCallRequested` for each tool call they add, as
real engines do (the tool loop leaves that event to the engine), so printers and routers see the same
tool-call lines with a double as with a provider. For HTTP-level tests against a stateful server, use
:mod:`geppetto.simulator`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any

from ._exceptions import UsageError
from .events import (
    STOP_END,
    STOP_TOOL_CALLS,
    Event,
    EventFinal,
    EventMetadata,
    EventReasoningDelta,
    EventStart,
    EventTextDelta,
    EventToolCallRequested,
    metadata_for,
    publish,
    with_sinks,
)
from .turns import PAYLOAD_ARGS, PAYLOAD_ID, PAYLOAD_NAME, Block, BlockKind, Turn, added, mark

__all__ = ["FunctionEngine", "ScriptedEngine"]

PROVIDER = "testing"
"""The provider name in the events the doubles publish."""


def _publish_tool_calls(meta: EventMetadata, blocks: Iterable[Block], already: Collection[str] = ()) -> None:
    for block in blocks:
        if block.kind is BlockKind.TOOL_CALL:
            call_id = str(block.payload.get(PAYLOAD_ID, ""))
            if call_id not in already:
                publish(
                    EventToolCallRequested(
                        meta, call_id, str(block.payload.get(PAYLOAD_NAME, "")), block.payload.get(PAYLOAD_ARGS)
                    )
                )


class FunctionEngine:
    """An engine that calls ``fn(turn)``; ``fn`` may be sync or async and may return a turn or ``None``
    (meaning it edited the turn in place).

    ``fn`` publishes its own start, text and final events if it wants them (it is the engine). For each
    ``tool_call`` block it added, an :class:`~geppetto.events.EventToolCallRequested` is published after
    it returns, unless ``fn`` published one for that call id itself.
    """

    def __init__(self, fn: Callable[[Turn], Turn | Awaitable[Turn | None] | None]) -> None:
        self.fn = fn
        self.calls = 0

    async def run_inference(self, turn: Turn) -> Turn:
        self.calls += 1
        before = mark(turn.blocks)
        announced: set[str] = set()

        def note(event: Event) -> None:
            if isinstance(event, EventToolCallRequested):
                announced.add(event.call_id)

        with with_sinks(note):
            result: Any = self.fn(turn)
            if inspect.isawaitable(result):
                result = await result
        out: Turn = turn if result is None else result
        _publish_tool_calls(metadata_for(out, PROVIDER), added(out.blocks, before), announced)
        return out


class ScriptedEngine:
    """An engine that appends the next queued step (a block or a list of blocks) on each call.

    Each step's blocks are copied with fresh ids, so one script can be replayed. ``turns`` records a
    clone of every turn the engine was given, for assertions.

    Each call publishes what a streaming engine would: a start event, the text of each ``llm_text``
    (and ``reasoning``) block as one delta, one tool-call-requested event per ``tool_call`` block, and a
    final event whose stop reason is ``tool_calls`` when the step called tools, else ``end_turn``.
    """

    def __init__(self, steps: Iterable[Block | list[Block]] = ()) -> None:
        self._steps: list[list[Block]] = [[s] if isinstance(s, Block) else list(s) for s in steps]
        self.turns: list[Turn] = []

    def push(self, *blocks: Block) -> None:
        """Queue one more step."""
        self._steps.append(list(blocks))

    @property
    def remaining(self) -> int:
        return len(self._steps)

    async def run_inference(self, turn: Turn) -> Turn:
        self.turns.append(turn.clone(keep_proof=False))
        if not self._steps:
            raise UsageError(
                f"ScriptedEngine has no step left for call {len(self.turns)}; queue more with push() or in the constructor"
            )
        meta = metadata_for(turn, PROVIDER)
        publish(EventStart(meta))
        added: list[Block] = []
        for block in self._steps.pop(0):
            fresh = block.copy()
            fresh.id = Block(block.kind).id
            fresh.turn_id = ""
            if fresh.kind is BlockKind.LLM_TEXT and fresh.text:
                publish(EventTextDelta(meta, fresh.text))
            elif fresh.kind is BlockKind.REASONING and fresh.text:
                publish(EventReasoningDelta(meta, fresh.text))
            added.append(turn.append(fresh))
        _publish_tool_calls(meta, added)
        final = metadata_for(turn, PROVIDER)
        final.stop_reason = STOP_TOOL_CALLS if any(b.kind is BlockKind.TOOL_CALL for b in added) else STOP_END
        publish(EventFinal(final, "".join(b.text for b in added if b.kind is BlockKind.LLM_TEXT)))
        return turn
