"""The tool calls of a Turn not answered yet, found without copying a block and, on a snapshot derived by
appends from one already read, without reading its blocks again.

Matching is positional: a call is answered by a later ``tool_use`` with its id, and each ``tool_use``
answers one call (the earliest open one with that id). A frozen snapshot (:class:`~geppetto.turns._cow.
Frozen`) remembers in its ``memo`` which calls were open at its end; a snapshot made from it by appends
only starts from that and reads only what it added, so a Session's checks before each prompt cost what the
prompt added, not the conversation's length."""

from __future__ import annotations

from collections.abc import Iterable

from ..turns import PAYLOAD_ID, Block, BlockKind, Frozen, Turn, held, origin_prefix

__all__ = ["pending_tool_calls"]

_MEMO = "open_tool_calls"

Open = dict[str, list[int]]
"""A call id -> the positions of its calls still open, in order (ids with none left out)."""


def _advance(state: Open, entries: Iterable[Block], start: int) -> Open:
    """``state`` after the entries from position ``start`` (changed in place and returned)."""
    for i, b in enumerate(entries, start):
        kind = b.kind
        if kind is BlockKind.TOOL_CALL:
            state.setdefault(str(b.payload.get(PAYLOAD_ID, "")), []).append(i)
        elif kind is BlockKind.TOOL_USE:
            key = str(b.payload.get(PAYLOAD_ID, ""))
            waiting = state.get(key)
            if waiting:
                waiting.pop(0)
                if not waiting:
                    del state[key]
    return state


def _copy(state: Open) -> Open:
    return {k: list(v) for k, v in state.items()}


def _open_at_end(frozen: Frozen) -> Open:
    """The calls open at the end of ``frozen``, remembered in its memo: from the nearest snapshot up its
    chain that remembers them, through snapshots that only appended, else from its own blocks."""
    chain: list[Frozen] = []
    node: Frozen | None = frozen
    state: Open | None = None
    while node is not None:
        state = (node.memo or {}).get(_MEMO)
        if state is not None:
            break
        chain.append(node)
        parent = node.parent
        node = parent if parent is not None and _appended(node, parent) else None  # else: read it whole
    if state is None:
        top = chain.pop()
        state = _remember(top, _advance({}, top.blocks, 0))
    for step in reversed(chain):
        state = _remember(step, _advance(_copy(state), step.tail, step.keep))
    return state


def _appended(node: Frozen, parent: Frozen) -> bool:
    """Whether ``node`` holds ``parent``'s blocks with the same calls and results where they were, then its
    own: only appended, or patched where no call or result was and none is (a prompt's provenance stamp)."""
    if node.keep != parent.size() or (node.patches and not parent.whole):
        return False
    old = parent.blocks if node.patches else []
    return all(_no_call(old[i]) and _no_call(new) for i, new in node.patches.items())


def _no_call(block: Block) -> bool:
    return block.kind is not BlockKind.TOOL_CALL and block.kind is not BlockKind.TOOL_USE


def _remember(frozen: Frozen, state: Open) -> Open:
    if frozen.memo is None:
        frozen.memo = {}
    frozen.memo[_MEMO] = state
    return state


def pending_tool_calls(turn: Turn) -> list[Block]:
    """The ``tool_call`` blocks not yet answered, in turn order.

    Matching is positional: a call is answered by a later ``tool_use`` with its id, and each
    ``tool_use`` answers one call (the earliest open one with that id). So a model that reuses an id
    on a later step (some compatible servers send ``call_0`` every time) still gets its new call run.
    """
    blocks = turn.blocks
    origin = origin_prefix(blocks)
    if origin is None:
        state = _advance({}, held(blocks), 0)
    else:
        start = origin.size()
        state = _advance(_copy(_open_at_end(origin)), _tail(blocks, start), start)
    return [blocks[i] for i in sorted(i for calls in state.values() for i in calls)]


def _tail(blocks: list[Block], start: int) -> Iterable[Block]:
    """The entries of ``blocks`` from ``start`` on, as held (nothing copied)."""
    return (list.__getitem__(blocks, i) for i in range(start, len(blocks)))
