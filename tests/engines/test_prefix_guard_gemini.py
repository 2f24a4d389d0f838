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
from geppetto.middleware import system_prompt, with_middleware
from geppetto.providers._prefix_guard import APPEND_FALLBACK, REASONING_STALE, TURN_META_PREFIX_GUARD
from geppetto.providers.gemini import GeminiEngine
from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.tools import pending_tool_calls
from geppetto.turns import PAYLOAD_ID, PAYLOAD_THOUGHT_SIGNATURE
from turn_edits import edit_signed, signed

PLACEHOLDERS = {"skip_thought_signature_validator", "context_engineering_is_the_way_to_go"}


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve() as s:
        yield s


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
            edit_signed(turn, engine, action, pick, step, stale, header_binds=True)
            if not pending_tool_calls(turn):
                turn.append(Block.user(f"question {step}"))
        reply = Reply(tool_calls=[ToolCall("get_weather", {"city": f"c{step}"})]) if tool else Reply(text=f"a{step}")
        sim.queue(reply)
        expected = {str(b.payload[PAYLOAD_THOUGHT_SIGNATURE]) for _, b in signed(turn) if id(b) not in stale}
        fresh = [b for _, b in signed(turn) if id(b) in stale and not REASONING_STALE.get(b.metadata)]
        sent = len(sim.requests)
        if policy == "error" and any(id(b) in stale for _, b in signed(turn)):
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


def test_append_asked_by_the_middleware_falls_back_to_drop_and_says_so(sim: Simulator) -> None:
    """Gemini takes no appended system message: a changed prompt under ``append`` costs the stale signature,
    and the report names the fallback."""
    sim.reset()
    engine = GeminiEngine("gemini-3-pro", "k", sim.url, thinking_budget=-1, tools=TOOLS[:1], stream=False)
    sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]), Reply(text="18C"))
    turn = Turn()
    turn.append(Block.user("weather?"))
    asyncio.run(with_middleware(engine, system_prompt("a", policy="append")).run_inference(turn))
    call = next(b for b in turn.blocks if b.kind is BlockKind.TOOL_CALL)
    turn.append(Block.tool_use(call.payload[PAYLOAD_ID], "18C"))
    asyncio.run(with_middleware(engine, system_prompt("b", policy="append")).run_inference(turn))
    report = TURN_META_PREFIX_GUARD.require(turn.metadata)
    assert (report["policy"], report["dropped"]) == ("append", 1)
    assert report["fallback"] == APPEND_FALLBACK
