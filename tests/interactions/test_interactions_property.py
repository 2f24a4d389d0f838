"""Property: whatever middleware does between calls (insert, remove, reorder, edit, a new system prompt,
dropping an interaction's last block), the history the simulator holds behind the Turn's last interaction
equals the Turn's steps after every call, and no request is rejected (chained mode)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from interactions_support import MODEL, PATH, THINKING, assert_server_holds_the_turn, engine

from geppetto.simulator import Simulator, serve
from geppetto.tools import pending_tool_calls
from geppetto.turns import PAYLOAD_ID, Block, BlockKind, Turn
from turn_edits import apply_edit, edit_steps, reply

ACTIONS = ("append", "insert", "remove", "reorder", "edit", "system", "drop_last")
REPLIES = ("text", "tool", "reasoning_text", "reasoning_tool", "text_and_tool", "parallel_tools")
EDITABLE = (BlockKind.USER, BlockKind.LLM_TEXT)


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve() as s:
        yield s


async def _scenario(sim: Simulator, steps: list[tuple[str, int, str]], model: str) -> None:
    eng = engine(sim, mode="chained", model=model)
    turn = Turn(blocks=[Block.system("system v0"), Block.user("question 0")])
    for step, (action, pick, kind) in enumerate(steps, start=1):
        sim.queue(reply(kind, step))
        sent = len(sim.requests)
        turn = await eng.run_inference(turn)
        assert [r.path for r in sim.requests[sent:]] == [PATH], "one create, none rejected"
        assert_server_holds_the_turn(sim, turn)
        for call in pending_tool_calls(turn):
            turn.append(Block.tool_use(call.payload[PAYLOAD_ID], f"result {step}"))
        apply_edit(turn, action, pick, step, editable=EDITABLE, before_a_result=False)


STEPS = edit_steps(ACTIONS, REPLIES)


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
