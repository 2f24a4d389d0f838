"""What middleware might do to a Turn between two calls, as the property tests of the stateful engines and
the prefix guard draw it: scripted replies by kind, insert positions, removals, reorderings, edits and a
response's last block dropped."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from geppetto.providers._streaming import normalize_tools
from geppetto.simulator import Reply, ToolCall
from geppetto.turns import (
    BLOCK_META_MIDDLEWARE,
    BLOCK_META_RESPONSE_ID,
    PAYLOAD_ID,
    PAYLOAD_THOUGHT_SIGNATURE,
    Block,
    BlockKind,
    Turn,
)

RID = str(BLOCK_META_RESPONSE_ID)

GUARD_ACTIONS = ("append", "system", "tools", "insert", "remove", "reorder", "edit")
"""The middleware actions the prefix guard's property tests draw."""
GUARD_TOOLS = [
    {"name": "get_weather", "description": "Weather of a city.", "parameters": {"type": "object"}},
    {"name": "get_time", "description": "Time in a city.", "parameters": {"type": "object"}},
]
"""The tools a middleware of those tests may swap (the first is offered at the start)."""


def reply(kind: str, step: int) -> Reply:
    """A scripted reply of one kind: text, tool, reasoning_text, reasoning_tool, text_and_tool, parallel_tools."""
    weather = ToolCall("get_weather", {"city": f"c{step}"})
    return {
        "text": Reply(text=f"a{step}"),
        "tool": Reply(tool_calls=[weather]),
        "reasoning_text": Reply(text=f"a{step}", reasoning=f"thinking {step}"),
        "reasoning_tool": Reply(reasoning=f"thinking {step}", tool_calls=[weather]),
        "text_and_tool": Reply(text=f"checking {step}", tool_calls=[weather]),
        "parallel_tools": Reply(tool_calls=[weather, ToolCall("get_weather", {"city": f"d{step}"})]),
    }[kind]


def edit_steps(actions: tuple[str, ...], replies: tuple[str, ...]) -> st.SearchStrategy[list[tuple[str, int, str]]]:
    """One to six steps, each an action, a pick (which block it touches) and the kind of the next reply."""
    return st.lists(
        st.tuples(st.sampled_from(actions), st.integers(0, 50), st.sampled_from(replies)), min_size=1, max_size=6
    )


def safe_positions(turn: Turn, *, before_a_result: bool = True) -> list[int]:
    """Insert positions that never split a tool call from its result (with ``before_a_result=False``, nor
    put a block just before a result)."""
    return [
        i
        for i in range(len(turn.blocks) + 1)
        if i == 0 or turn.blocks[i - 1].kind is not BlockKind.TOOL_CALL
        if before_a_result or i == len(turn.blocks) or turn.blocks[i].kind is not BlockKind.TOOL_USE
    ]


def remove_or_reorder(turn: Turn, action: str, editable: list[int], pick: int) -> None:
    """``remove``: one of the ``editable`` positions goes (while more than two are left); ``reorder``: two
    neighbours among them swap."""
    if action == "remove" and len(editable) > 2:
        del turn.blocks[editable[pick % len(editable)]]
    elif action == "reorder" and len(editable) > 1:
        i, j = editable[pick % len(editable)], editable[(pick + 1) % len(editable)]
        turn.blocks[i], turn.blocks[j] = turn.blocks[j], turn.blocks[i]


def drop_last_of_a_response(turn: Turn, pick: int) -> None:
    """Middleware drops the last block of one response; a dropped tool call takes its result with it."""
    ids = [b.metadata.get(RID) for b in turn.blocks]
    ends = [i for i, rid in enumerate(ids) if rid and (i + 1 == len(ids) or ids[i + 1] != rid)]
    if not ends:
        return
    dropped = turn.blocks.pop(ends[pick % len(ends)])
    if dropped.kind is BlockKind.TOOL_CALL:
        call_id = dropped.payload[PAYLOAD_ID]
        turn.blocks[:] = [
            b for b in turn.blocks if not (b.kind is BlockKind.TOOL_USE and b.payload[PAYLOAD_ID] == call_id)
        ]


def apply_edit(
    turn: Turn, action: str, pick: int, step: int, *, editable: tuple[BlockKind, ...], before_a_result: bool = True
) -> None:
    """One middleware ``action`` on the blocks of the ``editable`` kinds, then the next question."""
    positions = [i for i, b in enumerate(turn.blocks) if b.kind in editable]
    if action == "insert":
        spots = safe_positions(turn, before_a_result=before_a_result)
        turn.insert(spots[pick % len(spots)], Block.user(f"inserted {step}"))
    elif action in ("remove", "reorder"):
        remove_or_reorder(turn, action, positions, pick)
    elif action == "edit" and positions:
        turn.blocks[positions[pick % len(positions)]].payload["text"] = f"edited {step}"
    elif action == "system":
        turn.blocks[0].payload["text"] = f"system v{step}"
    elif action == "drop_last":
        drop_last_of_a_response(turn, pick)
    turn.append(Block.user(f"question {step}"))


def signed(turn: Turn) -> list[tuple[int, Block]]:
    """The blocks of ``turn`` that carry a thought signature, with their positions."""
    return [(i, b) for i, b in enumerate(turn.blocks) if b.payload.get(PAYLOAD_THOUGHT_SIGNATURE)]


def edit_signed(
    turn: Turn,
    engine: Any,
    action: str,
    pick: int,
    step: int,
    stale: set[int],
    *,
    header_binds: bool,
    reminder_by: str | None = None,
) -> None:
    """A middleware's change to ``turn`` (or to ``engine``'s tools); the signed blocks it puts a change in
    front of join ``stale`` (by ``id``). ``header_binds``: a changed system prompt or tool list makes every
    signature stale (generateContent), or none (the Interactions API, where both are per request).
    ``reminder_by`` names the middleware on an inserted block."""
    editable = [i for i, b in enumerate(turn.blocks) if b.kind in (BlockKind.USER, BlockKind.LLM_TEXT)]

    def after(position: int, inclusive: bool = False) -> None:
        stale.update(id(b) for i, b in signed(turn) if i > position or (inclusive and i == position))

    if action == "system":
        turn.blocks[0].payload["text"] = f"system v{step}"
        BLOCK_META_MIDDLEWARE.set(turn.blocks[0].metadata, "system_prompt")
        if header_binds:
            after(-1)
    elif action == "tools" and (not header_binds or len(engine.tools) != 1 + step % 2):
        engine.tools = normalize_tools(GUARD_TOOLS[: 1 + step % 2])
        if header_binds:
            after(-1)
    elif action == "insert":
        spots = [i for i in range(1, len(turn.blocks) + 1) if turn.blocks[i - 1].kind is not BlockKind.TOOL_CALL]
        at = spots[pick % len(spots)]
        after(at, inclusive=True)
        reminder = Block.user(f"reminder {step}")
        if reminder_by is not None:
            BLOCK_META_MIDDLEWARE.set(reminder.metadata, reminder_by)
        turn.insert(at, reminder)
    elif action == "remove" and len(editable) > 2:
        at = editable[pick % len(editable)]
        after(at)
        del turn.blocks[at]
    elif action == "reorder" and len(editable) > 1:
        i, j = editable[pick % len(editable)], editable[(pick + 1) % len(editable)]
        if i != j:
            after(min(i, j), inclusive=True)
            turn.blocks[i], turn.blocks[j] = turn.blocks[j], turn.blocks[i]
    elif action == "edit" and editable:
        at = editable[pick % len(editable)]
        after(at)
        turn.blocks[at].payload["text"] = f"edited {step}"
