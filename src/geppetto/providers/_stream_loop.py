"""The stream loop the Chat Completions, Claude and Gemini engines share: one streamed request through a
dialect's reducer, its events published as the stream arrives, the finished blocks appended to the turn."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from .._exceptions import ProviderError
from .._json import dumps
from ..events import (
    STOP_END,
    STOP_TOOL_CALLS,
    EventBuiltinTool,
    EventError,
    EventFinal,
    EventMetadata,
    EventReasoningDelta,
    EventStart,
    EventTextDelta,
    EventToolCallRequested,
    Usage,
    metadata_for,
    publish,
)
from ..output import READ_FROM_TURN, settle_output
from ..pricing import record_usage
from ..turns import (
    BLOCK_META_PROVIDER,
    BLOCK_META_RESPONSE_ID,
    PAYLOAD_ARGS,
    PAYLOAD_ID,
    PAYLOAD_NAME,
    TURN_META_MODEL,
    TURN_META_PROVIDER,
    TURN_META_STOP_REASON,
    Block,
    BlockKind,
    Turn,
    builtin_of,
)
from ._citations import publish_citations
from ._hints import with_fix
from ._sse import SSEEvent

__all__ = ["Delta", "StreamReducer", "StreamResult", "publish_builtin", "publish_parts", "run_stream"]

Delta = tuple[Literal["text", "reasoning"], str]
"""A piece of streamed output: ("text", "Hel") or ("reasoning", "Let me think")."""


@dataclass
class StreamResult:
    """A finished stream: the blocks in output order, usage, the normalized stop reason, the response id."""

    blocks: list[Block]
    usage: Usage | None
    """None when the stream reported none (the request is then unpriced)."""
    stop_reason: str
    response_id: str = ""


class StreamReducer(Protocol):
    """Turns one provider's SSE events into deltas and, at the end, blocks."""

    finished: bool
    """True once the terminal event arrived (the loop stops reading)."""
    response_id: str

    def feed(self, event: SSEEvent) -> list[Delta]:
        """Take one event; return the text and reasoning deltas it carried. Raises ProviderError for an
        error event and StreamError for a malformed one."""
        ...

    def result(self) -> StreamResult:
        """The finished output; raises StreamError when the stream ended early."""
        ...

    def completed_blocks(self) -> list[Block]:
        """Blocks complete so far (never tool calls): what a broken stream leaves in the turn."""
        ...


def _stamp(blocks: list[Block], provider: str, response_id: str) -> list[Block]:
    for block in blocks:
        BLOCK_META_PROVIDER.set(block.metadata, provider)
        if response_id:
            BLOCK_META_RESPONSE_ID.set(block.metadata, response_id)
    return blocks


def publish_builtin(meta: EventMetadata, blocks: list[Block]) -> None:
    """An :class:`~geppetto.events.EventBuiltinTool` for each built-in tool call or result among ``blocks``."""
    for block in blocks:
        info = builtin_of(block)
        if info is None:
            continue
        publish(
            EventBuiltinTool(
                meta,
                call_id=str(info.get("call_id") or ""),
                tool=str(info.get("tool") or ""),
                phase=str(info.get("phase") or "call"),
                name=str(info.get("name") or ""),
                input=info.get("input"),
                output=info.get("output"),
                error=bool(info.get("error")),
                sources=list(info.get("sources") or []),
            )
        )


def _calls(block: Block, name: str) -> bool:
    return block.kind is BlockKind.TOOL_CALL and block.payload.get(PAYLOAD_NAME) == name


def _as_answer(call: Block) -> Block:
    args = call.payload.get(PAYLOAD_ARGS)
    return Block.llm_text(args if isinstance(args, str) else dumps(args))


def _answer_from_tool(result: StreamResult, answer_tool: str) -> None:
    """A call of ``answer_tool`` becomes the text answer; the stop is an end when no other tool is called."""
    result.blocks = [_as_answer(b) if _calls(b, answer_tool) else b for b in result.blocks]
    if result.stop_reason == STOP_TOOL_CALLS and not any(b.kind is BlockKind.TOOL_CALL for b in result.blocks):
        result.stop_reason = STOP_END


def _append(turn: Turn, result: StreamResult, *, provider: str, model: str, output: Any) -> None:
    """The finished blocks into ``turn`` (stamped with the provider), the answer settled, the turn's
    provider, model and stop reason recorded."""
    turn.extend(_stamp(result.blocks, provider, result.response_id))
    settle_output(turn, result.blocks, output)
    TURN_META_PROVIDER.set(turn.metadata, provider)
    TURN_META_MODEL.set(turn.metadata, model)
    TURN_META_STOP_REASON.set(turn.metadata, result.stop_reason)


def publish_parts(meta: EventMetadata, blocks: list[Block]) -> None:
    """The answer's citations, built-in tool results and tool calls, as events (every engine's final step)."""
    publish_citations(meta, blocks)
    publish_builtin(meta, blocks)
    for block in blocks:
        if block.kind is BlockKind.TOOL_CALL:
            publish(
                EventToolCallRequested(
                    meta, block.payload[PAYLOAD_ID], block.payload[PAYLOAD_NAME], block.payload.get(PAYLOAD_ARGS)
                )
            )


async def run_stream(
    turn: Turn,
    *,
    provider: str,
    model: str,
    open_stream: Callable[[], AsyncGenerator[SSEEvent, None]],
    reducer: StreamReducer,
    key: str = "",
    answer_tool: str | None = None,
    output: Any = READ_FROM_TURN,
    on_result: Callable[[StreamResult, EventMetadata], None] | None = None,
) -> Turn:
    """Run one streamed request into ``turn``: publish start, deltas, tool calls and final (or error);
    append the finished blocks; record usage and stop reason. A failed stream appends only the blocks
    that completed (never a tool call) and re-raises; ``key`` (see :func:`key_hint`) is added to an
    authentication error's message. A call of ``answer_tool`` is the structured answer given as a tool
    call (Claude's tool mode): it becomes a text block holding its arguments as JSON. ``on_result`` is
    called with the result and the final event's metadata once the blocks are in the Turn, before the final
    event goes out (a stateful engine tags its answer's blocks there and adds what the request did)."""
    meta = metadata_for(turn, provider, model)
    publish(EventStart(meta))
    started = time.monotonic()
    try:
        async with aclosing(open_stream()) as events:
            async for event in events:
                for kind, text in reducer.feed(event):
                    publish(EventTextDelta(meta, text) if kind == "text" else EventReasoningDelta(meta, text))
                if reducer.finished:
                    break
        result = reducer.result()
    except ProviderError as exc:
        turn.extend(_stamp(reducer.completed_blocks(), provider, reducer.response_id))
        failed = metadata_for(turn, provider, model)
        failed.duration_s = time.monotonic() - started
        error = with_fix(exc, model, key)
        publish(EventError(failed, str(error), error_type=type(error).__name__))
        if error is exc:
            raise
        raise error from exc
    if answer_tool is not None:
        _answer_from_tool(result, answer_tool)
    _append(turn, result, provider=provider, model=model, output=output)
    publish_parts(meta, result.blocks)
    final = metadata_for(turn, provider, model)
    record_usage(turn, result.blocks, final, provider=provider, model=model, usage=result.usage)
    final.stop_reason = result.stop_reason
    final.duration_s = time.monotonic() - started
    if result.response_id:
        final.extra["response_id"] = result.response_id
    if on_result is not None:
        on_result(result, final)
    text = "".join(b.text for b in result.blocks if b.kind is BlockKind.LLM_TEXT)
    publish(EventFinal(final, text))
    return turn
