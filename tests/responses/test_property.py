"""Property: whatever middleware does between calls, the server's effective context equals the Turn's wire
form after every call, and no request is rejected (chained and conversation modes, against the simulator);
history compactions (OpenAI's /responses/compact and a model's summary) are among the edits.

Scripted replies include multi-block outputs (reasoning + message, text + tool call, parallel tool calls),
and middleware may drop a response's last block (with the result of a dropped tool call)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from responses_support import assert_valid_requests, engine, normalize, wire_before_last_response

from geppetto.middleware.compaction import compact, summarize_with
from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.testing import ScriptedEngine
from geppetto.tools import pending_tool_calls
from geppetto.turns import BLOCK_META_RESPONSE_ID, PAYLOAD_ID, Block, BlockKind, Turn

ACTIONS = ("append", "insert", "remove", "reorder", "edit", "system", "drop_last", "compact", "summarize")
REPLIES = ("text", "tool", "reasoning_text", "text_and_tool", "parallel_tools")
EDITABLE = (BlockKind.USER, BlockKind.LLM_TEXT, BlockKind.SYSTEM)
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
        "text_and_tool": Reply(text=f"checking {step}", tool_calls=[weather]),
        "parallel_tools": Reply(tool_calls=[weather, ToolCall("get_weather", {"city": f"d{step}"})]),
    }[kind]


def _safe_positions(turn: Turn) -> list[int]:
    """Insert positions that never split a tool call from its result."""
    return [i for i in range(len(turn.blocks) + 1) if i == 0 or turn.blocks[i - 1].kind is not BlockKind.TOOL_CALL]


def _drop_last_block_of_a_response(turn: Turn, pick: int) -> None:
    """Middleware drops the last block of one response; a dropped tool call takes its result with it."""
    ends = [i for i, b in enumerate(turn.blocks) if b.metadata.get(RID)]
    ends = [
        i
        for i in ends
        if i + 1 == len(turn.blocks) or turn.blocks[i + 1].metadata.get(RID) != turn.blocks[i].metadata.get(RID)
    ]
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
        i = editable[pick % len(editable)]
        j = editable[(pick + 1) % len(editable)]
        turn.blocks[i], turn.blocks[j] = turn.blocks[j], turn.blocks[i]
    elif action == "edit" and editable:
        turn.blocks[editable[pick % len(editable)]].payload["text"] = f"edited {step}"
    elif action == "system":
        turn.blocks[0].payload["text"] = f"system v{step}"
    elif action == "drop_last":
        _drop_last_block_of_a_response(turn, pick)
    turn.append(Block.user(f"question {step}"))


async def _scenario(sim: Simulator, mode: str, steps: list[tuple[str, int, str]]) -> None:
    eng = engine(sim, mode=mode)
    turn = Turn()
    turn.append(Block.system("system v0"))
    turn.append(Block.user("question 0"))
    for step, (action, pick, reply) in enumerate(steps, start=1):
        sim.queue(_reply(reply, step))
        sent = len(sim.requests)
        turn = await eng.run_inference(turn)
        # No request was rejected: exactly one POST /v1/responses (a rejection would show as a retry).
        assert [r.path for r in sim.requests[sent:] if r.path == "/v1/responses"] == ["/v1/responses"]
        rid, wire = wire_before_last_response(turn)
        assert normalize(sim.context_items(rid)) == wire
        for call in pending_tool_calls(turn):
            turn.append(Block.tool_use(call.payload[PAYLOAD_ID], f"result {step}"))
        if action == "compact":  # OpenAI's /responses/compact: kept user messages and a compaction item
            await compact(turn, eng.compact, keep_last=1 + pick % 3)
        elif action == "summarize":  # a model's summary as one user block
            await compact(
                turn, summarize_with(ScriptedEngine([Block.llm_text(f"summary {step}")])), keep_last=1 + pick % 3
            )
        _apply(turn, action, pick, step)
    assert_valid_requests(sim)


STEPS = st.lists(
    st.tuples(st.sampled_from(ACTIONS), st.integers(0, 50), st.sampled_from(REPLIES)), min_size=1, max_size=6
)


@pytest.mark.parametrize("mode", ["chained", "conversation"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
@example(  # a dropped message left its reasoning before another response's message (found by this test)
    steps=[
        ("append", 0, "reasoning_text"),
        ("drop_last", 0, "reasoning_text"),
        ("reorder", 37, "tool"),
        ("append", 0, "text"),
    ]
)
def test_context_always_equals_turn(sim: Simulator, mode: str, steps: list[tuple[str, int, str]]) -> None:
    sim.reset()
    asyncio.run(_scenario(sim, mode, steps))


@pytest.mark.parametrize("mode", ["chained", "conversation"])
def test_dropping_the_tool_call_after_a_message_of_the_same_response(sim: Simulator, mode: str) -> None:
    """The audit's case: text + tool call in one response, middleware drops the call (and its result)."""
    sim.reset()
    asyncio.run(_scenario(sim, mode, [("drop_last", 0, "text_and_tool"), ("append", 0, "text")]))
