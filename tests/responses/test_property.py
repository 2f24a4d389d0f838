"""Property: whatever middleware does between calls, the server's effective context equals the Turn's wire
form after every call, and no request is rejected (chained and conversation modes, against the simulator)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from responses_support import assert_valid_requests, engine, normalize, wire_before_last_response

from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.turns import Block, BlockKind, Turn

ACTIONS = ("append", "insert", "remove", "reorder", "edit", "system")
EDITABLE = (BlockKind.USER, BlockKind.LLM_TEXT, BlockKind.SYSTEM)


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve() as s:
        yield s


def _safe_positions(turn: Turn) -> list[int]:
    """Insert positions that never split a tool call from its result."""
    return [i for i in range(len(turn.blocks) + 1) if i == 0 or turn.blocks[i - 1].kind is not BlockKind.TOOL_CALL]


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
    turn.append(Block.user(f"question {step}"))


async def _scenario(sim: Simulator, mode: str, steps: list[tuple[str, int, bool]]) -> None:
    eng = engine(sim, mode=mode)
    turn = Turn()
    turn.append(Block.system("system v0"))
    turn.append(Block.user("question 0"))
    for step, (action, pick, tool) in enumerate(steps, start=1):
        sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": f"c{step}"})]) if tool else Reply(text=f"a{step}"))
        turn = await eng.run_inference(turn)
        rid, wire = wire_before_last_response(turn)
        assert normalize(sim.context_items(rid)) == wire
        if turn.blocks[-1].kind is BlockKind.TOOL_CALL:
            turn.append(Block.tool_use(turn.blocks[-1].payload["id"], f"result {step}"))
        else:
            _apply(turn, action, pick, step)
    assert_valid_requests(sim)


STEPS = st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, 50), st.booleans()), min_size=1, max_size=6)


@pytest.mark.parametrize("mode", ["chained", "conversation"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_context_always_equals_turn(sim: Simulator, mode: str, steps: list[tuple[str, int, bool]]) -> None:
    sim.reset()
    if mode == "conversation":
        import httpx

        if (
            httpx.post(f"{sim.openai_url}/conversations", json={}, headers={"authorization": "Bearer k"}).status_code
            == 404
        ):
            pytest.skip("this simulator build does not serve POST /v1/conversations yet")
        sim.reset()
    asyncio.run(_scenario(sim, mode, steps))
