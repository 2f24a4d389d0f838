"""The prefix guard on the Interactions engine's thought signatures, against the simulator.

Property: whatever middleware does between calls (system instruction, tools, inserted, removed or
reordered blocks, edits), in chained and stateless mode, no request is refused, and the signatures a
request sends are exactly those of the signed blocks it replays that nothing was changed before since the
model made them (an oracle of positions kept by the test, not the guard's digests); under ``error`` the
engine raises, sending nothing, exactly when one would have been stale. ``system_instruction`` and
``tools`` are interaction-scoped on this API, so changing them makes nothing stale. Every body is checked
against the google-genai types (``conftest.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interactions_support import PATH, THINKING, assert_server_holds_the_turn, creates, engine, last_interaction

from geppetto import Block, BlockKind, PrefixChangedError, Turn
from geppetto.providers._prefix_guard import REASONING_PREFIX, REASONING_STALE, TURN_META_PREFIX_GUARD
from geppetto.providers._streaming import normalize_tools
from geppetto.providers.gemini import InteractionsEngine
from geppetto.providers.gemini._interactions_steps import PLACEHOLDER_SIGNATURE, blocks_to_steps
from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.tools import pending_tool_calls
from geppetto.turns import BLOCK_META_MIDDLEWARE, BLOCK_META_RESPONSE_ID, PAYLOAD_ID, PAYLOAD_THOUGHT_SIGNATURE
from interactions_types import validate_request
from turn_edits import GUARD_ACTIONS, GUARD_TOOLS, edit_signed


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve() as s:
        yield s


def _sent_signatures(body: dict[str, Any]) -> set[str]:
    steps = body["input"]
    return {str(s["signature"]) for s in steps if s.get("signature") and s["signature"] != PLACEHOLDER_SIGNATURE}


async def _scenario(sim: Simulator, mode: str, policy: str, steps: list[tuple[str, int, bool]]) -> None:
    eng = engine(sim, model=THINKING, mode=mode, prefix_policy=policy, tools=GUARD_TOOLS[:1])
    turn = Turn(blocks=[Block.system("system v0"), Block.user("question 0")])
    stale: set[int] = set()
    for step, (action, pick, tool) in enumerate(steps, start=1):
        if step > 1:
            edit_signed(turn, eng, action, pick, step, stale, header_binds=False, reminder_by="reminders")
            if not pending_tool_calls(turn):
                turn.append(Block.user(f"question {step}"))
        weather = ToolCall("get_weather", {"city": f"c{step}"})
        thinking = f"thinking {step}"
        sim.queue(
            Reply(reasoning=thinking, tool_calls=[weather]) if tool else Reply(text=f"a{step}", reasoning=thinking)
        )
        replayed = [b for b in eng.plan(turn).blocks if b.payload.get(PAYLOAD_THOUGHT_SIGNATURE)]
        expected = {str(b.payload[PAYLOAD_THOUGHT_SIGNATURE]) for b in replayed if id(b) not in stale}
        fresh = [b for b in replayed if id(b) in stale and not REASONING_STALE.get(b.metadata)]
        sent = len(sim.requests)
        if policy == "error" and fresh:
            with pytest.raises(PrefixChangedError, match="reasoning block"):
                await eng.run_inference(turn)
            assert len(sim.requests) == sent  # nothing left
            sim.state.replies.clear()
            return
        await eng.run_inference(turn)
        assert [r.path for r in sim.requests[sent:]] == [PATH], "one create, none refused"
        assert "stale_signatures" not in sim.requests[-1].effects  # the simulator's own account agrees
        body = creates(sim)[-1]
        validate_request(body)
        assert _sent_signatures(body) == expected  # no stale thought replayed, every fresh one kept
        report = TURN_META_PREFIX_GUARD.get(turn.metadata)
        assert (report["dropped"] if report else 0) == len(fresh)  # each stale one counted once, when it goes
        if report:
            assert report["policy"] == policy
        if mode == "chained":  # the server's history is the Turn's, stand-ins included
            assert sim.held_steps(last_interaction(turn)) == blocks_to_steps(list(turn.blocks))
        for call in pending_tool_calls(turn):
            turn.append(Block.tool_use(call.payload[PAYLOAD_ID], f"result {step}"))


STEPS = st.lists(st.tuples(st.sampled_from(GUARD_ACTIONS), st.integers(0, 50), st.booleans()), min_size=2, max_size=6)


@pytest.mark.parametrize("policy", ["drop", "rewrite", "error"])
@pytest.mark.parametrize("mode", ["chained", "stateless"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_no_stale_signature_is_sent(sim: Simulator, mode: str, policy: str, steps: list[tuple[str, int, bool]]) -> None:
    sim.reset()
    asyncio.run(_scenario(sim, mode, policy, steps))


def _tool_turn(sim: Simulator, eng: InteractionsEngine) -> Turn:
    """A Turn whose current turn is a thought, a call and its result (the model thinks: Gemini 3)."""
    sim.queue(Reply(reasoning="which city?", tool_calls=[ToolCall("get_weather", {"city": "Paris"})]))
    turn = Turn(blocks=[Block.system("s"), Block.user("hello"), Block.llm_text("hi"), Block.user("weather?")])
    turn = asyncio.run(eng.run_inference(turn))
    call = next(b for b in turn.blocks if b.kind is BlockKind.TOOL_CALL)
    turn.append(Block.tool_use(call.payload[PAYLOAD_ID], "18C"))
    return turn


@pytest.mark.parametrize("mode", ["chained", "stateless"])
def test_a_stale_thought_before_a_current_call_gives_way_to_the_placeholder(sim: Simulator, mode: str) -> None:
    """A thinking model refuses a current-turn call without its signed thought: the stale one goes, and
    Google's placeholder signature stands in for it."""
    sim.reset()
    eng = engine(sim, model=THINKING, mode=mode, tools=GUARD_TOOLS[:1])
    turn = _tool_turn(sim, eng)
    thought = next(b for b in turn.blocks if b.kind is BlockKind.REASONING)
    assert REASONING_PREFIX.require(thought.metadata)["scope"] == "gemini-interactions"
    turn.blocks[2].payload["text"] = "hi there"  # an edit before the thought
    BLOCK_META_MIDDLEWARE.set(turn.blocks[2].metadata, "redactor")
    sim.queue(Reply(text="18C in Paris."))
    asyncio.run(eng.run_inference(turn))
    steps = creates(sim)[-1]["input"]
    kinds = [s["type"] for s in steps]
    assert {"type": "thought", "signature": PLACEHOLDER_SIGNATURE} in steps
    assert kinds.index("thought") == kinds.index("function_call") - 1
    assert "which city?" not in str(steps)
    report = TURN_META_PREFIX_GUARD.require(turn.metadata)
    assert (report["dropped"], report["changed_by"], report["blocks"]) == (1, "redactor", [thought.id])
    assert REASONING_STALE.get(thought.metadata) is True
    assert "stale_signatures" not in sim.requests[-1].effects
    # the stand-in is the block's form from now on: the server's history stays the Turn's
    turn.append(Block.user("and tomorrow?"))
    sim.queue(Reply(text="19C."))
    asyncio.run(eng.run_inference(turn))
    if mode == "chained":
        assert_server_holds_the_turn(sim, turn)
    else:
        assert {"type": "thought", "signature": PLACEHOLDER_SIGNATURE} in creates(sim)[-1]["input"]


def test_the_simulator_logs_a_signature_replayed_after_a_changed_prefix(sim: Simulator) -> None:
    """Google documents no binding of a signature to the steps before it: the request is served, and the
    simulator's request log says which thoughts a binding service would have refused."""
    sim.reset()
    eng = engine(sim, model=THINKING, mode="stateless", tools=GUARD_TOOLS[:1], prefix_policy="drop")
    turn = _tool_turn(sim, eng)
    body = eng.build_body(turn, eng.plan(turn))
    body["input"][1]["content"][0]["text"] = "hi there"  # what a client without the guard would send
    sim.queue(Reply(text="18C in Paris."))
    answer = httpx.post(f"{sim.url}{PATH}", json={**body, "stream": False}, headers={"x-goog-api-key": "k"})
    assert answer.status_code == 200
    thought = next(i for i, s in enumerate(body["input"]) if s["type"] == "thought")
    assert sim.requests[-1].effects["stale_signatures"] == [thought]


def test_an_unchanged_prefix_replays_every_thought_and_reports_nothing(sim: Simulator) -> None:
    sim.reset()
    eng = engine(sim, model=THINKING, mode="stateless", tools=GUARD_TOOLS[:1])
    turn = _tool_turn(sim, eng)
    signature = next(b for b in turn.blocks if b.kind is BlockKind.REASONING).payload[PAYLOAD_THOUGHT_SIGNATURE]
    turn.blocks[0].payload["text"] = "a new system instruction"  # interaction-scoped: binds nothing
    eng.tools = normalize_tools(GUARD_TOOLS)
    sim.queue(Reply(text="18C in Paris."))
    asyncio.run(eng.run_inference(turn))
    assert _sent_signatures(creates(sim)[-1]) == {signature}
    assert TURN_META_PREFIX_GUARD.get(turn.metadata) is None


def test_error_names_the_middleware_and_sends_nothing(sim: Simulator) -> None:
    sim.reset()
    eng = engine(sim, model=THINKING, mode="stateless", tools=GUARD_TOOLS[:1], prefix_policy="error")
    turn = _tool_turn(sim, eng)
    reminder = Block.user("remember: be brief")
    BLOCK_META_MIDDLEWARE.set(reminder.metadata, "reminders")
    turn.insert(2, reminder)
    sent = len(sim.requests)
    with pytest.raises(PrefixChangedError, match="middleware 'reminders'"):
        asyncio.run(eng.run_inference(turn))
    assert len(sim.requests) == sent


def test_a_stale_server_tool_step_keeps_its_content_without_the_signature() -> None:
    """A signed server-side tool step cannot go without its partner step: only its signature is left out."""
    from geppetto.providers.gemini._interactions_guard import guard_plan, stamp_interaction
    from geppetto.providers.gemini._interactions_plan import InteractionPlan
    from geppetto.turns import BLOCK_META_PROVIDER
    from geppetto.turns._builtin import raw_block

    search = raw_block({"type": "google_search_call", "id": "g1", "arguments": {"queries": ["x"]}, "signature": "c2ln"})
    BLOCK_META_PROVIDER.set(search.metadata, "gemini-interactions")
    turn = Turn(blocks=[Block.user("look it up"), search])
    stamp_interaction(turn, 1, None)
    turn.blocks[0].payload["text"] = "look it up, please"
    turn.append(Block.user("thanks"))
    plan = InteractionPlan("stateless", blocks_to_steps(list(turn.blocks)), list(turn.blocks), True)
    guard_plan(turn, plan, policy="drop", model=THINKING)
    assert plan.steps[1] == {"type": "google_search_call", "id": "g1", "arguments": {"queries": ["x"]}}
    assert TURN_META_PREFIX_GUARD.require(turn.metadata)["dropped"] == 1


def test_a_chained_delta_after_an_earlier_anchor_leaves_the_stale_thought_out(sim: Simulator) -> None:
    """An edit between two interactions: the request anchors on the earlier one, and the later thought,
    now in the delta after a changed step, is left out; the server's history is still the Turn's."""
    sim.reset()
    eng = engine(sim, model=THINKING, mode="chained")
    turn = Turn(blocks=[Block.system("s"), Block.user("q1")])
    for n in (1, 2):
        sim.queue(Reply(text=f"a{n}", reasoning=f"thinking {n}"))
        turn = asyncio.run(eng.run_inference(turn))
        turn.append(Block.user(f"q{n + 1}"))
    first, second = [b for b in turn.blocks if b.kind is BlockKind.REASONING]
    anchor = str(first.metadata[str(BLOCK_META_RESPONSE_ID)])
    turn.blocks[turn.blocks.index(second) - 1].payload["text"] = "q2, edited"  # after the first interaction
    sim.queue(Reply(text="a3"))
    asyncio.run(eng.run_inference(turn))
    body = creates(sim)[-1]
    assert body["previous_interaction_id"] == anchor
    assert [s["type"] for s in body["input"]] == ["user_input", "model_output", "user_input"]
    assert TURN_META_PREFIX_GUARD.require(turn.metadata)["blocks"] == [second.id]
    assert REASONING_STALE.get(second.metadata) is True and not REASONING_STALE.get(first.metadata)
    assert_server_holds_the_turn(sim, turn)
