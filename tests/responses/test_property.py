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
from responses_support import assert_valid_requests, engine, normalize, wire_before_last_response

from geppetto.middleware.compaction import compact, summarize_with
from geppetto.simulator import Simulator, serve
from geppetto.testing import ScriptedEngine
from geppetto.tools import pending_tool_calls
from geppetto.turns import PAYLOAD_ID, Block, BlockKind, Turn
from turn_edits import apply_edit, edit_steps, reply

ACTIONS = ("append", "insert", "remove", "reorder", "edit", "system", "drop_last", "compact", "summarize")
REPLIES = ("text", "tool", "reasoning_text", "text_and_tool", "parallel_tools")
EDITABLE = (BlockKind.USER, BlockKind.LLM_TEXT, BlockKind.SYSTEM)


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve() as s:
        yield s


async def _scenario(sim: Simulator, mode: str, steps: list[tuple[str, int, str]]) -> None:
    eng = engine(sim, mode=mode)
    turn = Turn()
    turn.append(Block.system("system v0"))
    turn.append(Block.user("question 0"))
    for step, (action, pick, kind) in enumerate(steps, start=1):
        sim.queue(reply(kind, step))
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
        apply_edit(turn, action, pick, step, editable=EDITABLE)
    assert_valid_requests(sim)


STEPS = edit_steps(ACTIONS, REPLIES)


@pytest.mark.slow
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
