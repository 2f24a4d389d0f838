"""Property: whatever middleware does between calls (insert, remove, reorder, edit, a new system prompt,
dropping an interaction's last block), the history the simulator holds behind the Turn's last interaction
equals the Turn's steps after every call, and no request is rejected (chained mode)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interactions_support import MODEL, PATH, THINKING, assert_server_holds_the_turn, engine

from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.tools import pending_tool_calls
from geppetto.turns import BLOCK_META_RESPONSE_ID, PAYLOAD_ID, Block, BlockKind, Turn

ACTIONS = ("append", "insert", "remove", "reorder", "edit", "system", "drop_last")
REPLIES = ("text", "tool", "reasoning_text", "reasoning_tool", "text_and_tool", "parallel_tools")
EDITABLE = (BlockKind.USER, BlockKind.LLM_TEXT)
RID = str(BLOCK_META_RESPONSE_ID)


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve() as s:
        yield s


def _reply(kind: str, step: int) -> Reply:
    weather = ToolCall("get_weather", {"city": f"c{step}"})
    return {
        "text": Reply(text=f"a{step}"),
        "tool": Reply(tool_calls=[weather]),
        "reasoning_text": Reply(text=f"a{step}", reasoning=f"thinking {step}"),
        "reasoning_tool": Reply(reasoning=f"thinking {step}", tool_calls=[weather]),
        "text_and_tool": Reply(text=f"checking {step}", tool_calls=[weather]),
        "parallel_tools": Reply(tool_calls=[weather, ToolCall("get_weather", {"city": f"d{step}"})]),
    }[kind]


def _safe_positions(turn: Turn) -> list[int]:
    """Insert positions that never split a tool call from its result."""
    return [
        i
        for i in range(len(turn.blocks) + 1)
        if i == 0 or turn.blocks[i - 1].kind not in (BlockKind.TOOL_CALL,)
        if i == len(turn.blocks) or turn.blocks[i].kind is not BlockKind.TOOL_USE
    ]


def _drop_last(turn: Turn, pick: int) -> None:
    """Middleware drops the last block of one interaction; a dropped tool call takes its result with it."""
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


def _apply(turn: Turn, action: str, pick: int, step: int) -> None:
    editable = [i for i, b in enumerate(turn.blocks) if b.kind in EDITABLE]
    if action == "insert":
        positions = _safe_positions(turn)
        turn.insert(positions[pick % len(positions)], Block.user(f"inserted {step}"))
    elif action == "remove" and len(editable) > 2:
        del turn.blocks[editable[pick % len(editable)]]
    elif action == "reorder" and len(editable) > 1:
        i, j = editable[pick % len(editable)], editable[(pick + 1) % len(editable)]
        turn.blocks[i], turn.blocks[j] = turn.blocks[j], turn.blocks[i]
    elif action == "edit" and editable:
        turn.blocks[editable[pick % len(editable)]].payload["text"] = f"edited {step}"
    elif action == "system":
        turn.blocks[0].payload["text"] = f"system v{step}"
    elif action == "drop_last":
        _drop_last(turn, pick)
    turn.append(Block.user(f"question {step}"))


async def _scenario(sim: Simulator, steps: list[tuple[str, int, str]], model: str) -> None:
    eng = engine(sim, mode="chained", model=model)
    turn = Turn(blocks=[Block.system("system v0"), Block.user("question 0")])
    for step, (action, pick, reply) in enumerate(steps, start=1):
        sim.queue(_reply(reply, step))
        sent = len(sim.requests)
        turn = await eng.run_inference(turn)
        assert [r.path for r in sim.requests[sent:]] == [PATH], "one create, none rejected"
        assert_server_holds_the_turn(sim, turn)
        for call in pending_tool_calls(turn):
            turn.append(Block.tool_use(call.payload[PAYLOAD_ID], f"result {step}"))
        _apply(turn, action, pick, step)


STEPS = st.lists(
    st.tuples(st.sampled_from(ACTIONS), st.integers(0, 50), st.sampled_from(REPLIES)), min_size=1, max_size=6
)


@pytest.mark.parametrize("model", [MODEL, THINKING])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_the_servers_history_always_equals_the_turn(
    sim: Simulator, model: str, steps: list[tuple[str, int, str]]
) -> None:
    """With a thinking model every thought is signed, and the signatures a whole-Turn resend replays are
    checked by the simulator."""
    sim.reset()
    asyncio.run(_scenario(sim, steps, model))
