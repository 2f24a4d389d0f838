"""What middleware might do to a Turn between two calls, as the property tests of the stateful engines and
the prefix guard draw it: scripted replies by kind, insert positions, removals, reorderings, edits and a
response's last block dropped."""

from __future__ import annotations

from hypothesis import strategies as st

from geppetto.simulator import Reply, ToolCall
from geppetto.turns import BLOCK_META_RESPONSE_ID, PAYLOAD_ID, Block, BlockKind, Turn

RID = str(BLOCK_META_RESPONSE_ID)


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
