"""History compaction: when a Turn grows past a size, its older blocks are replaced by a summary.

``compaction(compactor, max_blocks=..., max_tokens=..., keep_last=...)`` runs before every model call
it wraps. When the Turn holds more than ``max_blocks`` blocks or more than ``max_tokens`` tokens (as
the engine counts them when it can, e.g. the Responses engine's ``count_tokens``; else by ``estimate``),
the blocks between the system blocks at the head and the last ``keep_last``
steps go to ``compactor`` and are replaced by what it returns. A *step* starts at a user block or at
the first block of a run of model output (text, tool calls, reasoning); the cut never separates a tool
call from its result (it moves back until none crosses it) and never leaves reasoning without the
block it produced (reasoning opens its run). System blocks inside the range stay, before the summary.

Compactors (``async (blocks, turn) -> blocks``):

- :func:`summarize_with` (any engine): one model call with a summarizing prompt over a transcript of
  the blocks; the answer becomes one user block opening with :data:`SUMMARY_HEADER`;
- ``ResponsesEngine.compact`` (OpenAI's ``POST /responses/compact``): the kept user messages and an
  opaque ``compaction`` item that only the Responses API reads back.

Every block a compactor returns carries ``geppetto.compaction@v1`` (``{"replaced": [block ids],
"compactor": name}``) and ``geppetto.middleware@v1`` = ``"compaction"``. To compact between the steps
of a tool loop, wrap the engine itself: ``Session(with_middleware(engine, compaction(...)), tools=...)``.
On the Responses engine the edit makes the next request start a new chain (one fallback per
compaction, reason ``fingerprint_mismatch``); the requests after it chain again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .._exceptions import UsageError
from .._json import dumps
from ..engine import Engine, Handler
from ..tools import offering_tools
from ..turns import (
    BLOCK_META_MIDDLEWARE,
    PAYLOAD_ARGS,
    PAYLOAD_ERROR,
    PAYLOAD_ID,
    PAYLOAD_NAME,
    PAYLOAD_RESULT,
    Block,
    BlockKind,
    Turn,
    block_meta_key,
    result_text,
)
from ._chain import Middleware

__all__ = [
    "COMPACTION",
    "DEFAULT_SUMMARY_PROMPT",
    "SUMMARY_HEADER",
    "Compactor",
    "compaction",
    "compaction_range",
    "estimate_tokens",
    "summarize_with",
]

log = logging.getLogger("geppetto.middleware.compaction")

COMPACTION = block_meta_key("geppetto", "compaction", 1, dict)
"""``geppetto.compaction@v1`` on every block a compactor returned: ``{"replaced": [ids], "compactor": name}``."""

Compactor = Callable[[list[Block], Turn], Awaitable[list[Block]]]
"""Turns the blocks to replace (and the Turn they come from) into the blocks that replace them."""

SUMMARY_HEADER = "Summary of the earlier conversation:"
DEFAULT_SUMMARY_PROMPT = (
    "You compress conversation history. Summarize the transcript you are given so the conversation can go on "
    "without it: keep every fact, decision, name, number, open question and tool result that may matter later; "
    "drop pleasantries and repetition. Answer with the summary only."
)

_MODEL_OUTPUT = frozenset({BlockKind.LLM_TEXT, BlockKind.TOOL_CALL, BlockKind.REASONING, BlockKind.OTHER})


def estimate_tokens(blocks: Sequence[Block]) -> int:
    """A provider-neutral token estimate: about four characters per token (OpenAI's and Gemini's rule
    of thumb; Claude's tokenizer runs a little denser), plus four per block for its framing."""
    chars = 0
    for block in blocks:
        payload = block.payload
        chars += len(block.text)
        if block.kind is BlockKind.TOOL_CALL:
            chars += len(str(payload.get(PAYLOAD_NAME, ""))) + len(dumps(payload.get(PAYLOAD_ARGS)))
        elif block.kind is BlockKind.TOOL_USE:
            chars += len(result_text(payload.get(PAYLOAD_RESULT))) + len(str(payload.get(PAYLOAD_ERROR) or ""))
    return chars // 4 + 4 * len(blocks)


def _step_starts(blocks: Sequence[Block], first: int) -> list[int]:
    starts = []
    for i in range(first, len(blocks)):
        kind = blocks[i].kind
        if kind is BlockKind.USER or (
            kind in _MODEL_OUTPUT and (i == first or blocks[i - 1].kind not in _MODEL_OUTPUT)
        ):
            starts.append(i)
    return starts


def compaction_range(blocks: Sequence[Block], keep_last: int) -> tuple[int, int] | None:
    """``(first, cut)``: compact ``blocks[first:cut]`` (system blocks there stay) and keep the last
    ``keep_last`` steps from ``cut`` on; None when there is nothing before them to compact."""
    first = 0
    while first < len(blocks) and blocks[first].kind is BlockKind.SYSTEM:
        first += 1
    starts = _step_starts(blocks, first)
    if len(starts) <= keep_last:
        return None
    cut = starts[-keep_last] if keep_last > 0 else len(blocks)
    while True:  # no tool call before the cut may have its result after it, nor the other way round
        calls = {b.payload.get(PAYLOAD_ID): i for i, b in enumerate(blocks[:cut]) if b.kind is BlockKind.TOOL_CALL}
        crossing = [
            calls[b.payload.get(PAYLOAD_ID)]
            for b in blocks[cut:]
            if b.kind is BlockKind.TOOL_USE and b.payload.get(PAYLOAD_ID) in calls
        ]
        if not crossing:
            break
        earliest = min(crossing)
        cut = max((s for s in starts if s <= earliest), default=first)
    replaced = [b for b in blocks[first:cut] if b.kind is not BlockKind.SYSTEM]
    return (first, cut) if len(replaced) >= 2 else None


def compaction(
    compactor: Compactor,
    *,
    max_blocks: int | None = None,
    max_tokens: int | None = None,
    keep_last: int = 4,
    estimate: Callable[[Sequence[Block]], int] = estimate_tokens,
    engine: Any = None,
) -> Middleware:
    """Replace the Turn's older blocks by ``compactor``'s summary whenever it passes ``max_blocks`` blocks
    or ``max_tokens`` tokens, keeping the system blocks and the last ``keep_last`` steps.

    Tokens are counted by the engine when it can count them (an engine with ``count_tokens(turn)``, such
    as the Responses engine's ``POST /responses/input_tokens``): ``engine`` names it, and a compactor
    that is such an engine's bound method (``engine.compact``) names its engine; else ``estimate``."""
    if max_blocks is None and max_tokens is None:
        raise UsageError("compaction(...) needs a size to compact at: pass max_blocks=N or max_tokens=N")
    if keep_last < 1:
        raise UsageError("keep_last must be at least 1: the latest step is what the model answers")
    name = getattr(compactor, "__qualname__", None) or type(compactor).__name__
    counter = _token_counter(engine if engine is not None else getattr(compactor, "__self__", None))

    async def too_big(turn: Turn) -> bool:
        if max_blocks is not None and len(turn.blocks) > max_blocks:
            return True
        if max_tokens is None:
            return False
        tokens = await counter(turn) if counter is not None else estimate(turn.blocks)
        return tokens > max_tokens

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            if await too_big(turn):
                await compact(turn, compactor, keep_last=keep_last, name=name)
            return await next_handler(turn)

        return handler

    return middleware


def _token_counter(engine: Any) -> Callable[[Turn], Awaitable[int]] | None:
    count = getattr(engine, "count_tokens", None)
    return count if callable(count) else None


async def compact(turn: Turn, compactor: Compactor, *, keep_last: int, name: str = "") -> bool:
    """Compact ``turn`` in place now (see :func:`compaction`). Returns False when there was nothing to
    compact. When the compactor fails, the Turn is left as it was and the error goes on."""
    span = compaction_range(turn.blocks, keep_last)
    if span is None:
        return False
    first, cut = span
    kept_system = [b for b in turn.blocks[first:cut] if b.kind is BlockKind.SYSTEM]
    replaced = [b for b in turn.blocks[first:cut] if b.kind is not BlockKind.SYSTEM]
    summary = await compactor(replaced, turn)
    provenance: dict[str, Any] = {"replaced": [b.id for b in replaced], "compactor": name}
    for block in summary:
        COMPACTION.set(block.metadata, dict(provenance))
        BLOCK_META_MIDDLEWARE.set(block.metadata, "compaction")
        if not block.turn_id:
            block.turn_id = turn.id
    turn.blocks[first:cut] = [*kept_system, *summary]
    log.info("compaction: %d blocks replaced by %d (%s)", len(replaced), len(summary), name)
    return True


def _transcript(blocks: Sequence[Block]) -> str:
    lines = []
    for block in blocks:
        kind, payload = block.kind, block.payload
        if kind is BlockKind.TOOL_CALL:
            lines.append(f"assistant called {payload.get(PAYLOAD_NAME)}({dumps(payload.get(PAYLOAD_ARGS))})")
        elif kind is BlockKind.TOOL_USE:
            error = payload.get(PAYLOAD_ERROR)
            lines.append(f"tool result: {error or result_text(payload.get(PAYLOAD_RESULT))}")
        elif kind in (BlockKind.USER, BlockKind.LLM_TEXT, BlockKind.SYSTEM) and block.text:
            lines.append(f"{block.role or kind}: {block.text}")
    return "\n".join(lines)


def summarize_with(engine: Engine, *, prompt: str = DEFAULT_SUMMARY_PROMPT) -> Compactor:
    """A compactor that asks ``engine`` (any provider, the model it is configured with) for a summary of
    the blocks' transcript under ``prompt``; the answer becomes one user block."""

    async def summarize(blocks: list[Block], turn: Turn) -> list[Block]:
        request = Turn()
        request.append(Block.system(prompt))
        request.append(Block.user(_transcript(blocks)))
        with offering_tools(()):  # a tool loop around the compaction offers its tools to its own steps only
            answer = await engine.run_inference(request)
        text = "\n".join(b.text for b in answer.blocks[2:] if b.kind is BlockKind.LLM_TEXT).strip()
        if not text:
            raise UsageError(
                "the summarizing model answered without text, so nothing was compacted: check the model "
                "passed to summarize_with(...) and its prompt"
            )
        return [Block.user(f"{SUMMARY_HEADER}\n{text}")]

    summarize.__qualname__ = "summarize_with"
    return summarize
