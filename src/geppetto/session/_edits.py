"""History edits on a session: rewind, fork, edit and remove, each a new snapshot saved to the store.

The history stays append-only: an edit adds a snapshot, derived from the latest, that holds the changed
blocks and says what was done in ``geppetto.history_edit@v1`` (``{"op": "rewind", "prompts": n,
"removed": [ids]}``, ``{"op": "edit", "block": id}``, ``{"op": "remove", "removed": [ids]}``, and on a
fork's first snapshot ``{"op": "fork", "from": session id, "turn": turn id}``). It is saved like an
inference's output, so a restored session continues from it and the inspector shows it.

Server state stays true without being touched here: each block keeps the fingerprint of the prefix it
was answered after, so the next request of a Responses engine anchors on the latest response whose
prefix is unchanged (chained), or cuts its conversation back to it (conversation mode); a summary from
compaction is kept as the blocks it replaced. A fork shares the history so far: in chained mode both
sessions go on from the same response (a response can be continued twice); a conversation cannot hold
two branches, so the fork's first request starts its own (``docs/decisions.md``).

An edit here is a function ``Turn -> Turn`` made by :func:`rewind`, :func:`edit`, :func:`remove` or
:func:`fork` (making it checks its arguments). :class:`~geppetto.Session` applies it to a seed, a fresh copy
of its latest snapshot that the edit may change in place, and adds the result to its history; nothing here
reads or changes a session.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import Any

from .._exceptions import UsageError
from ..middleware.compaction import COMPACTION
from ..turns import (
    BLOCK_META_MIDDLEWARE,
    PAYLOAD_ID,
    PAYLOAD_TEXT,
    TURN_META_HISTORY_EDIT,
    TURN_META_SESSION_ID,
    Block,
    BlockKind,
    Turn,
)

__all__ = ["EDITED_BY", "Edit", "edit", "fork", "prompt_positions", "remove", "rewind"]

Edit = Callable[[Turn], Turn]
"""A history edit: given the seed (a copy of the latest snapshot under a fresh Turn id), the edited Turn."""

EDITED_BY = "session.edit"
"""What ``geppetto.middleware@v1`` names on a block :meth:`Session.edit` changed (the inspector shows it)."""


def prompt_positions(turn: Turn) -> builtins.list[int]:
    """The indexes of the Turn's prompts: user blocks, not the ones compaction made (a summary, the user
    messages a server compaction keeps)."""
    return [i for i, b in enumerate(turn.blocks) if b.kind is BlockKind.USER and not COMPACTION.has(b.metadata)]


def _index(turn: Turn, block_id: str) -> int:
    for i, b in enumerate(turn.blocks):
        if b.id == block_id:
            return i
    raise UsageError(
        f"the session's latest turn holds no block {block_id!r}: read the ids from session.latest.blocks "
        "(or geppetto inspect / the web inspector)"
    )


def rewind(n: int) -> Edit:
    """Drop the last ``n`` prompts with their answers (see :meth:`Session.rewind`)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise UsageError(f"rewind takes a number of prompts of at least 1, got {n!r}")

    def rewound(seed: Turn) -> Turn:
        prompts = prompt_positions(seed)
        if n > len(prompts):
            raise UsageError(
                f"cannot rewind {n} prompts: the session's latest turn holds {len(prompts)} (prompts folded into "
                "a compaction summary are not counted); pass a smaller number"
            )
        cut = prompts[-n]
        removed = [b.id for b in seed.blocks[cut:]]
        del seed.blocks[cut:]
        TURN_META_HISTORY_EDIT.set(seed.metadata, {"op": "rewind", "prompts": n, "removed": removed})
        return seed

    return rewound


def edit(block_id: str, text: str | None, payload: Mapping[str, Any] | None) -> Edit:
    """Change one block's text or payload fields (see :meth:`Session.edit`)."""
    if text is None and not payload:
        raise UsageError("session.edit(block_id, ...) needs the new text, or payload={field: value} to change")

    def edited(seed: Turn) -> Turn:
        block = seed.blocks[_index(seed, block_id)]
        if text is not None:
            if not isinstance(block.payload.get(PAYLOAD_TEXT), str):
                raise UsageError(
                    f"block {block_id!r} is a {block.kind.value} block without text: "
                    "pass payload={field: value} instead"
                )
            block.payload[PAYLOAD_TEXT] = text
        if payload:
            block.payload.update(dict(payload))
        BLOCK_META_MIDDLEWARE.set(block.metadata, EDITED_BY)
        TURN_META_HISTORY_EDIT.set(seed.metadata, {"op": "edit", "block": block_id})
        return seed

    return edited


def _with_pair(turn: Turn, block: Block) -> set[str]:
    """``block``'s id, with its tool call's result (or its result's call): a call is never left without
    its answer, which every provider would refuse."""
    ids = {block.id}
    if block.kind in (BlockKind.TOOL_CALL, BlockKind.TOOL_USE):
        call = block.payload.get(PAYLOAD_ID)
        pair = (BlockKind.TOOL_CALL, BlockKind.TOOL_USE)
        ids.update(b.id for b in turn.blocks if b.kind in pair and call and b.payload.get(PAYLOAD_ID) == call)
    return ids


def remove(block_id: str) -> Edit:
    """Remove one block (a tool call together with its result; see :meth:`Session.remove`)."""

    def removed(seed: Turn) -> Turn:
        ids = _with_pair(seed, seed.blocks[_index(seed, block_id)])
        gone = [b.id for b in seed.blocks if b.id in ids]
        for i in reversed(range(len(seed.blocks))):
            if seed.blocks[i].id in ids:
                del seed.blocks[i]
        TURN_META_HISTORY_EDIT.set(seed.metadata, {"op": "remove", "removed": gone})
        return seed

    return removed


def _forget_conversation(turn: Turn) -> None:
    """A fork does not write into the conversation its origin goes on in: its first request starts its own."""
    from ..providers.openai_responses import ConversationState, get_state, set_state

    state = get_state(turn)
    if state is not None and state.mode == "conversation" and state.conversation_id:
        set_state(turn, ConversationState("conversation", None, state.previous_response_id, None))


def fork(origin_session: str, origin_turn: str, session_id: str) -> Edit:
    """The first snapshot of session ``session_id``, forked from turn ``origin_turn`` of ``origin_session``
    (see :meth:`Session.fork`)."""
    if session_id == origin_session:
        raise UsageError(f"a fork needs its own session id, not {origin_session!r}: leave session_id out")

    def forked(seed: Turn) -> Turn:
        TURN_META_SESSION_ID.set(seed.metadata, session_id)
        TURN_META_HISTORY_EDIT.set(seed.metadata, {"op": "fork", "from": origin_session, "turn": origin_turn})
        _forget_conversation(seed)
        return seed

    return forked
