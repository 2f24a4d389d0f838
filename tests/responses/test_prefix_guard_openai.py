"""The prefix guard on the Responses API, against the simulator (which drops reasoning replayed after a
changed prefix silently, as the service does, and says so in its request log).

Property: whatever middleware does between calls (system prompt, tools, inserted, removed or reordered
blocks, edits), in stateless, chained and conversation modes, no request is refused, the simulator never
has to drop a reasoning item (the guard left every stale one out), nothing is dropped when nothing but
appends happened, ``error`` raises exactly when an edit made reasoning stale, and the server's context
still equals the Turn's wire form.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from responses_support import assert_valid_requests, engine, normalize, wire_before_last_response

from geppetto import Block, BlockKind, PrefixChangedError, Turn
from geppetto.providers._prefix_guard import REASONING_PREFIX, REASONING_STALE, TURN_META_PREFIX_GUARD, guard_metrics
from geppetto.providers.openai_responses import ResponsesMetrics
from geppetto.providers.openai_responses._tools import EngineTools
from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.tools import pending_tool_calls
from geppetto.turns import BLOCK_META_MIDDLEWARE, BLOCK_META_RESPONSE_ID, PAYLOAD_ID

ACTIONS = ("append", "system", "tools", "insert", "remove", "reorder", "edit")
EDITS = ("system", "insert", "remove", "reorder", "edit")
TIME_TOOL = {"name": "get_time", "description": "Time in a city", "parameters": {"type": "object"}}


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve() as s:
        yield s


def _edit(turn: Turn, eng: object, action: str, pick: int, step: int) -> bool:
    """A middleware's change between two calls; True when it touched a block before the Turn's end."""
    editable = [i for i, b in enumerate(turn.blocks) if b.kind in (BlockKind.USER, BlockKind.LLM_TEXT)]
    if action == "system":
        turn.blocks[0].payload["text"] = f"system v{step}"
        BLOCK_META_MIDDLEWARE.set(turn.blocks[0].metadata, "system_prompt")
        return True
    if action == "tools":
        eng._tools = EngineTools([TIME_TOOL] if step % 2 else [])  # type: ignore[attr-defined]
        return False
    if action == "insert":
        spots = [i for i in range(1, len(turn.blocks) + 1) if turn.blocks[i - 1].kind is not BlockKind.TOOL_CALL]
        at = spots[pick % len(spots)]
        block = Block.user(f"reminder {step}")
        BLOCK_META_MIDDLEWARE.set(block.metadata, "reminders")
        turn.insert(at, block)
        return at < len(turn.blocks) - 1
    if action == "remove" and len(editable) > 2:
        del turn.blocks[editable[pick % len(editable)]]
        return True
    if action == "reorder" and len(editable) > 1:
        i, j = editable[pick % len(editable)], editable[(pick + 1) % len(editable)]
        turn.blocks[i], turn.blocks[j] = turn.blocks[j], turn.blocks[i]
        return True
    if action == "edit" and editable:
        block = turn.blocks[editable[pick % len(editable)]]
        block.payload["text"] = f"edited {step}"
        BLOCK_META_MIDDLEWARE.set(block.metadata, "redactor")
        return True
    return False


def _replies_stale(turn: Turn) -> int:
    return sum(1 for b in turn.blocks if b.kind is BlockKind.REASONING and REASONING_STALE.get(b.metadata))


async def _scenario(sim: Simulator, mode: str, policy: str, steps: list[tuple[str, int, bool]]) -> None:
    store = mode != "stateless"
    eng = engine(sim, mode=mode, store=store, prefix_policy=policy, reasoning_effort="low")
    turn = Turn()
    turn.append(Block.system("system v0"))
    turn.append(Block.user("question 0"))
    for step, (action, pick, tool) in enumerate(steps, start=1):
        edited = step > 1 and _edit(turn, eng, action, pick, step)
        if step > 1 and not pending_tool_calls(turn):
            turn.append(Block.user(f"question {step}"))
        reply = Reply(reasoning=f"thinking {step}", tool_calls=[ToolCall("get_weather", {"city": f"c{step}"})])
        sim.queue(reply if tool else Reply(reasoning=f"thinking {step}", text=f"answer {step}"))
        sent, before = len(sim.requests), _replies_stale(turn)
        try:
            await eng.run_inference(turn)
        except PrefixChangedError as err:
            assert policy == "error" and edited, err
            assert [r for r in sim.requests[sent:] if r.path == "/v1/responses"] == []
            sim.state.replies.clear()
            return
        posts = [r for r in sim.requests[sent:] if r.path == "/v1/responses"]
        assert len(posts) == 1 and posts[0].effects == {}  # accepted, and nothing the server had to drop
        report = TURN_META_PREFIX_GUARD.get(turn.metadata)
        if not edited:
            assert report is None or report["dropped"] == 0
        if report:
            assert report["policy"] == policy and report["dropped"] == _replies_stale(turn) - before
        if store:
            rid, wire = wire_before_last_response(turn)
            assert normalize(sim.context_items(rid)) == wire
        for call in pending_tool_calls(turn):
            turn.append(Block.tool_use(call.payload[PAYLOAD_ID], f"result {step}"))
    assert_valid_requests(sim)


STEPS = st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, 50), st.booleans()), min_size=2, max_size=5)


@pytest.mark.parametrize(("mode", "policy"), [("stateless", "drop"), ("chained", "drop"), ("conversation", "drop"),
                                              ("stateless", "error"), ("chained", "rewrite"), ("chained", "append"),
                                              ("stateless", "append")])  # fmt: skip
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_no_stale_reasoning_reaches_the_server(
    sim: Simulator, mode: str, policy: str, steps: list[tuple[str, int, bool]]
) -> None:
    sim.reset()
    asyncio.run(_scenario(sim, mode, policy, steps))


def _first_turn(sim: Simulator, mode: str, policy: str = "drop") -> tuple[object, Turn]:
    eng = engine(
        sim,
        mode=mode,
        store=mode != "stateless",
        prefix_policy=policy,
        reasoning_effort="low",
        metrics=ResponsesMetrics(),
    )
    sim.queue(Reply(reasoning="weigh it", text="One."))
    turn = Turn()
    turn.append(Block.system("be brief"))
    turn.append(Block.user("q1"))
    asyncio.run(eng.run_inference(turn))
    return eng, turn


def test_a_stateless_resend_leaves_stale_reasoning_out_and_names_the_middleware(
    sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim.reset()
    guard_metrics.reset()
    eng, turn = _first_turn(sim, "stateless")
    reasoning = turn.blocks[2]
    assert REASONING_PREFIX.get(reasoning.metadata) is not None
    turn.blocks[1].payload["text"] = "q1, rephrased"
    BLOCK_META_MIDDLEWARE.set(turn.blocks[1].metadata, "rephraser")
    turn.append(Block.user("q2"))
    sim.queue(Reply(text="Two."))
    asyncio.run(eng.run_inference(turn))  # type: ignore[attr-defined]
    body = sim.requests[-1].body
    assert body["input"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "q1, rephrased"},
        {"role": "assistant", "content": "One."},  # its reasoning left out, so without its id
        {"role": "user", "content": "q2"},
    ]
    assert sim.requests[-1].effects == {}
    report = TURN_META_PREFIX_GUARD.require(turn.metadata)
    assert (report["dropped"], report["changed_by"], report["blocks"]) == (1, "rephraser", [reasoning.id])
    assert guard_metrics.snapshot()["dropped"] == {"openai": 1}
    assert eng.metrics.snapshot()["counters"]["reasoning_dropped"] == 1  # type: ignore[attr-defined]
    assert "middleware 'rephraser' changed user block" in caplog.text


def test_an_unguarded_replay_is_dropped_silently_by_the_simulator(sim: Simulator) -> None:
    """What the guard spares: the service takes the request and quietly leaves the reasoning out (the
    model reasons again; the simulator's log names the item)."""
    sim.reset()
    eng, turn = _first_turn(sim, "stateless")
    item = turn.blocks[2].payload["item_id"]
    turn.blocks[1].payload["text"] = "q1, rephrased"
    turn.append(Block.user("q2"))
    plan = eng.plan(turn)  # type: ignore[attr-defined]  # planned, not guarded
    body = eng.build_body(turn, plan)  # type: ignore[attr-defined]
    sim.queue(Reply(text="Two."))
    import httpx

    answer = httpx.post(
        f"{sim.openai_url}/responses", json={**body, "stream": False}, headers={"authorization": "Bearer k"}
    )
    assert answer.status_code == 200
    assert sim.requests[-1].effects == {"dropped_reasoning": [item]}
    assert answer.json()["usage"]["output_tokens_details"]["reasoning_tokens"] > 0


def test_error_names_the_middleware_and_the_block(sim: Simulator) -> None:
    sim.reset()
    eng, turn = _first_turn(sim, "chained", "error")
    reasoning = turn.blocks[2]
    turn.blocks[0].payload["text"] = "be thorough"
    BLOCK_META_MIDDLEWARE.set(turn.blocks[0].metadata, "system_prompt")
    turn.blocks[3].payload["text"] = "One!"  # and the answer: no anchor, the whole Turn would go
    turn.append(Block.user("q2"))
    with pytest.raises(PrefixChangedError) as err:
        asyncio.run(eng.run_inference(turn))  # type: ignore[attr-defined]
    assert str(err.value).startswith(
        f"openai: reasoning block {reasoning.id} was produced after a prefix that has changed since: middleware "
        f"'system_prompt' changed system block {turn.blocks[0].id}."
    )


def test_an_unchanged_prefix_drops_nothing_in_any_mode(sim: Simulator) -> None:
    for mode in ("stateless", "chained", "conversation"):
        sim.reset()
        eng, turn = _first_turn(sim, mode)
        for step in range(2, 5):
            turn.append(Block.user(f"q{step}"))
            sim.queue(Reply(reasoning=f"r{step}", text=f"a{step}"))
            asyncio.run(eng.run_inference(turn))  # type: ignore[attr-defined]
            assert TURN_META_PREFIX_GUARD.get(turn.metadata) is None
        if mode == "stateless":
            assert sum(1 for i in sim.requests[-1].body["input"] if i.get("type") == "reasoning") == 3


@pytest.mark.parametrize("policy", ["append", "drop"])
def test_append_sends_a_changed_system_prompt_appended_and_keeps_chaining_and_reasoning(
    sim: Simulator, policy: str
) -> None:
    """Under ``append`` a system prompt changed between prompts goes as an appended developer message: the
    request chains on the latest response (no fallback), its reasoning is kept (nothing stale, nothing
    dropped by the server), the server's context is the Turn, and a middleware setting the same prompt
    again adds nothing. Under ``drop`` the same change falls back to the whole Turn and drops the reasoning."""
    sim.reset()
    eng, turn = _first_turn(sim, "chained", policy)
    reasoning = turn.blocks[2]
    first = turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]
    for step, prompt in enumerate(("be thorough", "be thorough")):  # the middleware sets it on every request
        turn.blocks[0].payload["text"] = prompt
        BLOCK_META_MIDDLEWARE.set(turn.blocks[0].metadata, "system_prompt")
        turn.append(Block.user(f"q{step + 2}"))
        sim.queue(Reply(reasoning="weigh again", text=f"Answer {step + 2}."))
        asyncio.run(eng.run_inference(turn))  # type: ignore[attr-defined]
        body = sim.requests[-1].body
        if policy == "drop":
            assert "previous_response_id" not in body  # the changed prefix breaks the chain
            assert REASONING_STALE.get(reasoning.metadata) is True
            return
        assert body["previous_response_id"] == first
        new = [{"role": "developer", "content": "be thorough"}] if step == 0 else []
        assert body["input"] == [*new, {"role": "user", "content": f"q{step + 2}"}]
        assert sim.requests[-1].effects == {}  # the server kept every reasoning item it holds
        assert TURN_META_PREFIX_GUARD.get(turn.metadata) is None and not REASONING_STALE.get(reasoning.metadata)
        first = turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]
    assert [(b.role, b.text) for b in turn.blocks if b.kind is BlockKind.SYSTEM] == [
        ("system", "be brief"),
        ("developer", "be thorough"),
    ]
    rid, wire = wire_before_last_response(turn)
    assert normalize(sim.context_items(rid)) == wire
    assert_valid_requests(sim)


def test_append_in_a_stateless_request_keeps_the_reasoning_after_the_old_prompt(sim: Simulator) -> None:
    """Stateless, the whole Turn goes: the old prompt, the reasoning made under it, the new prompt appended."""
    sim.reset()
    eng, turn = _first_turn(sim, "stateless", "append")
    item = turn.blocks[2].payload["item_id"]
    turn.blocks[0].payload["text"] = "be thorough"
    turn.append(Block.user("q2"))
    sim.queue(Reply(text="Two."))
    asyncio.run(eng.run_inference(turn))  # type: ignore[attr-defined]
    sent = sim.requests[-1].body["input"]
    assert [(i.get("type") or "message", i.get("role"), i.get("id")) for i in sent] == [
        ("message", "system", None),
        ("message", "user", None),
        ("reasoning", None, item),
        ("message", "assistant", turn.blocks[3].payload["item_id"]),
        ("message", "developer", None),
        ("message", "user", None),
    ]
    assert sent[0]["content"] == "be brief" and sent[4]["content"] == "be thorough"
    assert sim.requests[-1].effects == {} and TURN_META_PREFIX_GUARD.get(turn.metadata) is None
    assert_valid_requests(sim)
