"""The prefix guard on Gemini's thought signatures, against the simulator.

Property: whatever middleware does between calls (system instruction, tools, inserted, removed or
reordered blocks, edits), no request is refused, and the signatures sent are exactly those of the signed
blocks nothing was changed before since Gemini made them (an oracle of positions, kept by the test, not
the guard's digests); under ``error`` the engine raises exactly when one would have been stale.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from prefix_guard_support import TOOLS, under_every_policy

from geppetto import Block, BlockKind, PrefixChangedError, Turn
from geppetto.providers._prefix_guard import REASONING_STALE, TURN_META_PREFIX_GUARD
from geppetto.providers._streaming import normalize_tools
from geppetto.providers.gemini import GeminiEngine
from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.tools import pending_tool_calls
from geppetto.turns import BLOCK_META_MIDDLEWARE, PAYLOAD_ID, PAYLOAD_THOUGHT_SIGNATURE

PLACEHOLDERS = {"skip_thought_signature_validator", "context_engineering_is_the_way_to_go"}


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve() as s:
        yield s


def _signed(turn: Turn) -> list[tuple[int, Block]]:
    return [(i, b) for i, b in enumerate(turn.blocks) if b.payload.get(PAYLOAD_THOUGHT_SIGNATURE)]


def _edit(turn: Turn, engine: GeminiEngine, action: str, pick: int, step: int, stale: set[int]) -> None:
    """A middleware's change; the signed blocks it puts a change in front of join ``stale`` (by id)."""
    editable = [i for i, b in enumerate(turn.blocks) if b.kind in (BlockKind.USER, BlockKind.LLM_TEXT)]

    def after(position: int, inclusive: bool = False) -> None:
        stale.update(id(b) for i, b in _signed(turn) if i > position or (inclusive and i == position))

    if action == "system":
        turn.blocks[0].payload["text"] = f"system v{step}"
        BLOCK_META_MIDDLEWARE.set(turn.blocks[0].metadata, "system_prompt")
        after(-1)
    elif action == "tools" and len(engine.tools) != 1 + step % 2:
        engine.tools = normalize_tools(TOOLS[: 1 + step % 2])
        after(-1)
    elif action == "insert":
        spots = [i for i in range(1, len(turn.blocks) + 1) if turn.blocks[i - 1].kind is not BlockKind.TOOL_CALL]
        at = spots[pick % len(spots)]
        after(at, inclusive=True)
        turn.insert(at, Block.user(f"reminder {step}"))
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


def _sent_signatures(body: dict[str, Any]) -> set[str]:
    return {
        str(p["thoughtSignature"])
        for c in body["contents"]
        for p in c["parts"]
        if "thoughtSignature" in p and p["thoughtSignature"] not in PLACEHOLDERS
    }


async def _scenario(sim: Simulator, policy: str, steps: list[tuple[str, int, bool]]) -> None:
    engine = GeminiEngine(
        "sim-1", "k", sim.url, thinking_budget=-1, prefix_policy=policy, tools=TOOLS[:1], stream=False
    )
    turn = Turn()
    turn.append(Block.system("system v0"))
    turn.append(Block.user("question 0"))
    stale: set[int] = set()
    for step, (action, pick, tool) in enumerate(steps, start=1):
        if step > 1:
            _edit(turn, engine, action, pick, step, stale)
            if not pending_tool_calls(turn):
                turn.append(Block.user(f"question {step}"))
        reply = Reply(tool_calls=[ToolCall("get_weather", {"city": f"c{step}"})]) if tool else Reply(text=f"a{step}")
        sim.queue(reply)
        expected = {str(b.payload[PAYLOAD_THOUGHT_SIGNATURE]) for _, b in _signed(turn) if id(b) not in stale}
        fresh = [b for _, b in _signed(turn) if id(b) in stale and not REASONING_STALE.get(b.metadata)]
        sent = len(sim.requests)
        if policy == "error" and any(id(b) in stale for _, b in _signed(turn)):
            with pytest.raises(PrefixChangedError):
                await engine.run_inference(turn)
            assert len(sim.requests) == sent
            sim.state.replies.clear()
            return
        await engine.run_inference(turn)
        assert _sent_signatures(sim.requests[-1].body) == expected
        report = TURN_META_PREFIX_GUARD.get(turn.metadata)
        assert (report["dropped"] if report else 0) == len(fresh)  # each stale one counted once, when it goes
        for call in pending_tool_calls(turn):
            turn.append(Block.tool_use(call.payload[PAYLOAD_ID], f"result {step}"))


@under_every_policy
def test_no_stale_signature_is_sent(sim: Simulator, policy: str, steps: list[tuple[str, int, bool]]) -> None:
    sim.reset()
    asyncio.run(_scenario(sim, policy, steps))


def test_a_stale_call_signature_gives_way_to_the_placeholder_in_the_current_turn(sim: Simulator) -> None:
    """Gemini 3 refuses a current-turn call without a signature: the stale one goes, the placeholder comes."""
    sim.reset()
    engine = GeminiEngine("gemini-3-pro", "k", sim.url, thinking_budget=-1, tools=TOOLS[:1], stream=False)
    sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]), Reply(text="18C"))
    turn = Turn()
    turn.append(Block.system("a"))
    turn.append(Block.user("weather?"))
    asyncio.run(engine.run_inference(turn))
    call = next(b for b in turn.blocks if b.kind is BlockKind.TOOL_CALL)
    turn.append(Block.tool_use(call.payload[PAYLOAD_ID], "18C"))
    turn.blocks[0].payload["text"] = "b"
    asyncio.run(engine.run_inference(turn))
    parts = [p for c in sim.requests[-1].body["contents"] for p in c["parts"] if "functionCall" in p]
    assert parts[0]["thoughtSignature"] == "skip_thought_signature_validator"
    assert TURN_META_PREFIX_GUARD.require(turn.metadata)["dropped"] == 1
