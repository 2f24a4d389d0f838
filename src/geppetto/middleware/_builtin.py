"""Built-in middleware: system prompt, tool-result reordering, logging."""

from __future__ import annotations

import asyncio
import logging
import time

from .._exceptions import ConfigurationError
from ..engine import Handler
from ..turns import (
    BLOCK_META_MIDDLEWARE,
    PAYLOAD_ID,
    PAYLOAD_TEXT,
    PREFIX_POLICIES,
    TURN_DATA_PREFIX_POLICY,
    TURN_META_INFERENCE_ID,
    TURN_META_SESSION_ID,
    Block,
    BlockKind,
    Turn,
)
from ._chain import Middleware

__all__ = ["logging_middleware", "reorder_tool_results", "system_prompt"]


def system_prompt(text: str, *, policy: str | None = None) -> Middleware:
    """Make the first system block say ``text``: replace its text, or insert one at index 0.

    Idempotent: a turn whose first system block already says ``text`` is left untouched, so the
    blocks a server already holds stay valid anchors.

    ``policy`` asks the engine's prefix guard for this Turn's requests (``geppetto.prefix_policy@v1``,
    over the engine's ``prefix_policy``): ``"append"`` sends a changed prompt as an appended system
    message where the provider and model take one, so the reasoning and cache made under the old prompt
    stay valid (elsewhere it drops, and says so); ``"drop"``, ``"rewrite"``, ``"error"`` as the engines
    take them.
    """
    if policy is not None and policy not in PREFIX_POLICIES:
        raise ConfigurationError(
            f"system_prompt(policy={policy!r}): use one of {', '.join(map(repr, PREFIX_POLICIES))}, or leave it "
            "out to keep the engine's prefix_policy"
        )

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            if policy is not None:
                TURN_DATA_PREFIX_POLICY.set(turn.data, policy)
            first = next((b for b in turn.blocks if b.kind is BlockKind.SYSTEM), None)
            if first is None:
                block = Block.system(text)
                BLOCK_META_MIDDLEWARE.set(block.metadata, "system_prompt")
                turn.insert(0, block)
            elif first.payload.get(PAYLOAD_TEXT) != text:
                first.payload[PAYLOAD_TEXT] = text
                BLOCK_META_MIDDLEWARE.set(first.metadata, "system_prompt")
            return await next_handler(turn)

        return handler

    return middleware


def reorder_blocks(blocks: list[Block]) -> list[Block]:
    """Each run of tool_call blocks followed by their tool_use blocks in call order.

    Providers require a call's result right after the assistant turn that asked for it. A tool_use
    whose call is in no earlier run stays where it is. Already ordered input comes back unchanged.
    """
    uses: dict[str, Block] = {}
    for b in blocks:
        if b.kind is BlockKind.TOOL_USE:
            uses.setdefault(str(b.payload.get(PAYLOAD_ID, "")), b)
    placed: set[str] = set()  # ids of tool_use blocks already emitted
    out: list[Block] = []
    i = 0
    while i < len(blocks):
        b = blocks[i]
        if b.kind is BlockKind.TOOL_CALL:
            run: list[Block] = []
            while i < len(blocks) and blocks[i].kind is BlockKind.TOOL_CALL:
                run.append(blocks[i])
                i += 1
            out.extend(run)
            for call in run:
                use = uses.get(str(call.payload.get(PAYLOAD_ID, "")))
                if use is not None and use.id not in placed:
                    out.append(use)
                    placed.add(use.id)
            continue
        if b.kind is not BlockKind.TOOL_USE or b.id not in placed:
            out.append(b)
            placed.add(b.id)
        i += 1
    return out


def reorder_tool_results() -> Middleware:
    """Put each tool_use block right after its run of tool_call blocks, in call order."""

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            ordered = reorder_blocks(turn.blocks)
            if [b.id for b in ordered] != [b.id for b in turn.blocks]:
                turn.blocks[:] = ordered
            return await next_handler(turn)

        return handler

    return middleware


def logging_middleware(logger: logging.Logger | None = None, level: int = logging.INFO) -> Middleware:
    """Log each inference's start and end with its session, inference and turn ids, block counts and block ids.

    The ids and counts are in the message itself (``inference done session=s1 inference=i1 turn=t1
    blocks=3 added=2 new=[b7 b8] in 0.412s``: ``new`` are the ids of the blocks the inference added; an
    id not set yet shows as ``-``) and, for structured handlers, in ``record.geppetto`` (with
    ``block_ids``, every block's id in order, at start and end, and ``new_block_ids``). A failure is logged at ERROR and re-raised; a cancelled inference
    (:class:`asyncio.CancelledError`) is logged at ``level`` as cancelled and re-raised, since
    cancelling is a caller's choice, not an error.
    """
    log = logger or logging.getLogger("geppetto.inference")

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            entry = _LogEntry(log, level, turn)
            try:
                out = await next_handler(turn)
            except asyncio.CancelledError:
                entry.cancelled(turn)
                raise
            except Exception as exc:
                entry.failed(turn, exc)
                raise
            entry.done(out)
            return out

        return handler

    return middleware


class _LogEntry:
    """The log lines of one inference: its start (logged when made), then its end, failure or cancellation."""

    def __init__(self, log: logging.Logger, level: int, turn: Turn) -> None:
        self.log, self.level = log, level
        self.ids = {
            "session_id": TURN_META_SESSION_ID.get(turn.metadata) or "",
            "inference_id": TURN_META_INFERENCE_ID.get(turn.metadata) or "",
            "turn_id": turn.id,
        }
        self.who = " ".join(
            f"{name}={self.ids[key] or '-'}"
            for name, key in (("session", "session_id"), ("inference", "inference_id"), ("turn", "turn_id"))
        )
        self.before = len(turn.blocks)
        self.known = [b.id for b in turn.blocks]
        log.log(
            level,
            "inference start %s blocks=%d",
            self.who,
            self.before,
            extra={"geppetto": {**self.ids, "blocks": self.before, "block_ids": self.known}},
        )
        self.started = time.perf_counter()

    def cancelled(self, turn: Turn) -> None:
        now = len(turn.blocks)
        self.log.log(
            self.level,
            "inference cancelled %s blocks=%d after %.3fs",
            self.who,
            now,
            time.perf_counter() - self.started,
            extra={"geppetto": {**self.ids, "blocks": now, "cancelled": True}},
        )

    def failed(self, turn: Turn, exc: Exception) -> None:
        now = len(turn.blocks)
        self.log.log(
            logging.ERROR,
            "inference failed %s blocks=%d: %s: %s",
            self.who,
            now,
            type(exc).__name__,
            exc,
            extra={"geppetto": {**self.ids, "blocks": now}},
        )

    def done(self, out: Turn) -> None:
        after = len(out.blocks)
        seen = set(self.known)
        new_ids = [b.id for b in out.blocks if b.id not in seen]
        self.log.log(
            self.level,
            "inference done %s blocks=%d added=%d new=[%s] in %.3fs",
            self.who,
            after,
            after - self.before,
            " ".join(new_ids),
            time.perf_counter() - self.started,
            extra={
                "geppetto": {
                    **self.ids,
                    "blocks": after,
                    "added": after - self.before,
                    "block_ids": [b.id for b in out.blocks],
                    "new_block_ids": new_ids,
                }
            },
        )
