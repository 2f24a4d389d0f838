"""The prefix guard on Claude: replayed thinking goes out only behind the prefix it was made after.

Against the simulator, which binds each thinking block to its prefix as the service does (a 400 by
default, ``drop_block`` when asked). Property: whatever middleware does between calls (system prompt,
tools, inserted, removed or reordered blocks, edits), no request is refused, nothing stale is replayed
under ``drop`` (the simulator, asked to ``drop_block``, never has to), ``error`` raises exactly when the
unguarded request would have been refused, and ``rewrite`` keeps the thinking a system change would cost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conformance_support import check_sent
from prefix_guard_support import TOOLS, under_every_policy, under_policies

from geppetto import Block, BlockKind, ConfigurationError, PrefixChangedError, Turn
from geppetto.middleware import system_prompt, with_middleware
from geppetto.providers._prefix_guard import REASONING_STALE, TURN_META_PREFIX_GUARD, guard_metrics
from geppetto.providers._streaming import normalize_tools
from geppetto.providers.anthropic import ClaudeEngine, build_request
from geppetto.providers.anthropic._binding import INPUT_TRANSFORMATIONS, SYSTEM_NOTES, takes_system_messages
from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.tools import pending_tool_calls
from geppetto.turns import BLOCK_META_MIDDLEWARE, PAYLOAD_ID
from recorded import MISSING, ROOT, exchanges
from turn_edits import remove_or_reorder


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve() as s:
        yield s


def _engine(sim: Simulator, policy: str, **kw: Any) -> ClaudeEngine:
    return ClaudeEngine(
        "sim-1", "sk-ant-test", sim.url, thinking_budget=1024, prefix_policy=policy, tools=TOOLS[:1], **kw
    )


def _edit(turn: Turn, engine: ClaudeEngine, action: str, pick: int, step: int) -> None:
    """What a middleware might do between two calls; each stamps the blocks it touches."""
    editable = [i for i, b in enumerate(turn.blocks) if b.kind in (BlockKind.USER, BlockKind.LLM_TEXT)]
    if action == "system":
        turn.blocks[0].payload["text"] = f"system v{step}"
        BLOCK_META_MIDDLEWARE.set(turn.blocks[0].metadata, "system_prompt")
    elif action == "tools":
        engine.tools = normalize_tools(TOOLS[: 1 + step % 2])
    elif action == "insert":
        spots = [i for i in range(1, len(turn.blocks) + 1) if turn.blocks[i - 1].kind is not BlockKind.TOOL_CALL]
        block = Block.user(f"reminder {step}")
        BLOCK_META_MIDDLEWARE.set(block.metadata, "reminders")
        turn.insert(spots[pick % len(spots)], block)
    elif action in ("remove", "reorder"):
        remove_or_reorder(turn, action, editable, pick)
    elif action == "edit" and editable:
        block = turn.blocks[editable[pick % len(editable)]]
        block.payload["text"] = f"edited {step}"
        BLOCK_META_MIDDLEWARE.set(block.metadata, "redactor")


def _refused(sim: Simulator, body: dict[str, Any]) -> bool:
    """Whether the simulator refuses ``body`` as it stands (no ``block_binding``: the account default, a 400)."""
    sim.queue(Reply(text="probe"))
    plain = {**body, "stream": False}
    thinking = plain.get("thinking")
    if isinstance(thinking, dict):
        plain["thinking"] = {k: v for k, v in thinking.items() if k != "block_binding"}
    answer = httpx.post(f"{sim.url}/v1/messages", json=plain, headers={"x-api-key": "k", "anthropic-version": "1"})
    if answer.status_code == 200:
        return False
    sim.state.replies.clear()  # the probe's reply was not used
    assert answer.status_code == 400 and "bound to a different conversation" in answer.text, answer.text
    return True


def _thinking_sent(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] for c in m["content"] if c["type"] in ("thinking", "redacted_thinking"))


async def _scenario(sim: Simulator, policy: str, steps: list[tuple[str, int, bool]]) -> None:
    engine = _engine(sim, policy)
    turn = Turn()
    turn.append(Block.system("system v0"))
    turn.append(Block.user("question 0"))
    for step, (action, pick, tool) in enumerate(steps, start=1):
        if step > 1:
            _edit(turn, engine, action, pick, step)
            if not pending_tool_calls(turn):
                turn.append(Block.user(f"question {step}"))
        unguarded = build_request(turn, model="sim-1", tools=engine.tools, thinking_budget=1024)
        stale = _refused(sim, unguarded)
        reply = Reply(reasoning=f"thinking {step}", tool_calls=[ToolCall("get_weather", {"city": "x"})])
        sim.queue(reply if tool else Reply(reasoning=f"thinking {step}", text=f"answer {step}"))
        sent = len(sim.requests)
        left_out = sum(1 for b in turn.blocks if REASONING_STALE.get(b.metadata))  # stale before, out for good
        if policy == "error" and stale:
            with pytest.raises(PrefixChangedError):
                await engine.run_inference(turn)
            assert len(sim.requests) == sent  # nothing left
            sim.state.replies.clear()
            return
        await engine.run_inference(turn)  # never refused: the simulator answers 400 to a stale block
        body = sim.requests[-1].body
        assert INPUT_TRANSFORMATIONS.get(turn.metadata) in (None, [])  # Claude had nothing to drop
        report = TURN_META_PREFIX_GUARD.get(turn.metadata)
        if policy == "drop":  # dropped now exactly when the request as the Turn stands would be refused
            assert bool(report and report["dropped"]) == stale
        if report:
            assert report["policy"] == policy
        thinking = [b for b in turn.blocks[:-2] if b.kind is BlockKind.REASONING]
        dropped = report["dropped"] if report else 0
        assert _thinking_sent(body) + dropped + left_out == len(thinking)
        for call in pending_tool_calls(turn):
            turn.append(Block.tool_use(call.payload[PAYLOAD_ID], f"result {step}"))


@pytest.mark.slow
@under_every_policy
def test_no_stale_thinking_is_ever_sent(sim: Simulator, policy: str, steps: list[tuple[str, int, bool]]) -> None:
    sim.reset()
    asyncio.run(_scenario(sim, policy, steps))


@pytest.mark.slow
@under_policies("append")
def test_no_stale_thinking_is_ever_sent_under_append(
    sim: Simulator, policy: str, steps: list[tuple[str, int, bool]]
) -> None:
    sim.reset()
    asyncio.run(_scenario(sim, policy, steps))


def _two_calls(sim: Simulator, engine: Any, middleware_text: str | None = None) -> Turn:
    sim.queue(Reply(reasoning="first thought", text="one"), Reply(reasoning="second thought", text="two"))
    turn = Turn()
    turn.append(Block.system("You are terse."))
    turn.append(Block.user("q1"))
    asyncio.run(engine.run_inference(turn))
    turn.append(Block.user("q2"))
    run = with_middleware(engine, system_prompt(middleware_text)) if middleware_text else engine
    asyncio.run(run.run_inference(turn))
    return turn


def test_drop_warns_naming_the_middleware_and_counts(sim: Simulator, caplog: pytest.LogCaptureFixture) -> None:
    sim.reset()
    guard_metrics.reset()
    turn = _two_calls(sim, _engine(sim, "drop"), "You are verbose.")
    second = sim.requests[-1].body
    assert second["system"] == [{"type": "text", "text": "You are verbose."}]
    assert _thinking_sent(second) == 0  # the first thought was made under the old system prompt
    report = TURN_META_PREFIX_GUARD.require(turn.metadata)
    first = next(b for b in turn.blocks if b.kind is BlockKind.REASONING)
    assert report == {
        "policy": "drop",
        "dropped": 1,
        "dropped_bytes": report["dropped_bytes"],
        "rewritten": 0,
        "changed_by": "",
        "changed": "the system prompt or the tool list",
        "blocks": [first.id],
    }
    assert report["dropped_bytes"] > 0
    assert guard_metrics.snapshot()["dropped"] == {"anthropic": 1}
    assert "left out 1 replayed reasoning block" in caplog.text


def test_an_edited_block_names_its_middleware_in_the_error(sim: Simulator) -> None:
    sim.reset()
    engine = _engine(sim, "error")
    sim.queue(Reply(reasoning="first thought", text="one"))
    turn = Turn()
    turn.append(Block.system("s"))
    turn.append(Block.user("my card is 4111"))
    asyncio.run(engine.run_inference(turn))
    turn.blocks[1].payload["text"] = "my card is [redacted]"
    BLOCK_META_MIDDLEWARE.set(turn.blocks[1].metadata, "redactor")
    turn.append(Block.user("q2"))
    thought = next(b for b in turn.blocks if b.kind is BlockKind.REASONING)
    with pytest.raises(PrefixChangedError) as err:
        asyncio.run(engine.run_inference(turn))
    assert str(err.value) == (
        f"anthropic: reasoning block {thought.id} was produced after a prefix that has changed since: middleware "
        f"'redactor' changed user block {turn.blocks[1].id}. The provider would reject or silently drop it. Keep the "
        "change append-only (add a new block at the end instead of editing an earlier one), or pass "
        "prefix_policy='drop' (leave the stale reasoning out) or 'rewrite' to the engine"
    )


def test_rewrite_sends_the_changed_system_prompt_as_an_appended_system_message(sim: Simulator) -> None:
    sim.reset()
    engine = _engine(sim, "rewrite")
    turn = _two_calls(sim, engine, "You are verbose.")
    second = sim.requests[-1].body
    assert second["system"] == [{"type": "text", "text": "You are terse."}]  # the prefix Claude bound stays
    assert second["messages"][-1] == {"role": "system", "content": [{"type": "text", "text": "You are verbose."}]}
    assert _thinking_sent(second) == 1
    assert SYSTEM_NOTES.require(turn.data)["notes"] == [{"at": 3, "text": "You are verbose."}]
    # the next request keeps the note where it was: both thoughts stay valid
    sim.queue(Reply(reasoning="third", text="three"))
    turn.append(Block.user("q3"))
    asyncio.run(with_middleware(engine, system_prompt("You are verbose.")).run_inference(turn))
    third = sim.requests[-1].body
    assert [m["role"] for m in third["messages"]] == ["user", "assistant", "user", "system", "assistant", "user"]
    assert _thinking_sent(third) == 2


def test_rewrite_falls_back_to_drop_for_a_changed_tool_list(sim: Simulator, caplog: pytest.LogCaptureFixture) -> None:
    sim.reset()
    engine = _engine(sim, "rewrite")
    sim.queue(Reply(reasoning="first", text="one"), Reply(text="two"))
    turn = Turn()
    turn.append(Block.user("q1"))
    asyncio.run(engine.run_inference(turn))
    engine.tools = normalize_tools(TOOLS)
    turn.append(Block.user("q2"))
    asyncio.run(engine.run_inference(turn))
    assert _thinking_sent(sim.requests[-1].body) == 0
    assert "cannot be sent append-only: dropped instead" in caplog.text


def _stale_request(sim: Simulator) -> dict[str, Any]:
    """An unguarded whole request replaying thinking made under system prompt "a", now "b"."""
    sim.reset()
    sim.queue(Reply(reasoning="first", text="one"))
    turn = Turn()
    turn.append(Block.system("a"))
    turn.append(Block.user("q1"))
    asyncio.run(_engine(sim, "drop").run_inference(turn))
    turn.blocks[0].payload["text"] = "b"
    turn.append(Block.user("q2"))
    return build_request(turn, model="sim-1", tools=[], thinking_budget=1024, stream=False)


def test_the_simulator_refuses_or_drops_stale_thinking_as_the_service_does(sim: Simulator) -> None:
    body = _stale_request(sim)
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    refused = httpx.post(f"{sim.url}/v1/messages", json=body, headers=headers)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == (
        "messages.1.content.0: Invalid `signature` in `thinking` block. The block is bound to a different "
        'conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
    )
    body["thinking"]["block_binding"] = {"prefix_mismatch_behavior": "drop_block"}
    no_beta = httpx.post(f"{sim.url}/v1/messages", json=body, headers=headers)
    assert no_beta.json()["error"]["message"] == "thinking.enabled.block_binding: Extra inputs are not permitted"
    sim.queue(Reply(text="two"))
    beta = {**headers, "anthropic-beta": "thinking-binding-controls-2026-08-01"}
    dropped = httpx.post(f"{sim.url}/v1/messages", json=body, headers=beta).json()
    assert dropped["input_transformations"] == [
        {"type": "thinking_dropped", "path": "messages.1.content.0", "reason": "prefix_binding_mismatch"}
    ]


def test_claude_input_transformations_are_read_back_and_counted(sim: Simulator) -> None:
    """A block the guard could not judge (no digest kept: made before it) is dropped by Claude; the
    engine reads that back from the stream's message_start, logs and counts it."""
    sim.reset()
    guard_metrics.reset()
    engine = _engine(sim, "drop")
    sim.queue(Reply(reasoning="first", text="one"), Reply(text="two"))
    turn = Turn()
    turn.append(Block.system("a"))
    turn.append(Block.user("q1"))
    asyncio.run(engine.run_inference(turn))
    thought = next(b for b in turn.blocks if b.kind is BlockKind.REASONING)
    thought.metadata.pop("geppetto.reasoning_prefix@v1")  # as if made before the guard kept digests
    turn.blocks[0].payload["text"] = "b"
    turn.append(Block.user("q2"))
    asyncio.run(engine.run_inference(turn))
    assert INPUT_TRANSFORMATIONS.require(turn.metadata) == [
        {"type": "thinking_dropped", "path": "messages.1.content.0", "reason": "prefix_binding_mismatch"}
    ]
    assert guard_metrics.snapshot()["transformations"] == {"anthropic": 1}


def test_an_older_account_reads_stale_thinking_and_says_so(sim: Simulator) -> None:
    """``claude_prefix_mismatch="allow"``: the service does not enforce the check but reports each block."""
    body = _stale_request(sim)
    sim.queue(Reply(text="two"))
    sim.claude_prefix_mismatch = "allow"
    try:
        answer = httpx.post(f"{sim.url}/v1/messages", json=body, headers={"x-api-key": "k", "anthropic-version": "1"})
    finally:
        sim.claude_prefix_mismatch = "error"
    assert answer.json()["input_transformations"] == [
        {"type": "thinking_mismatch_allowed", "path": "messages.1.content.0", "reason": "prefix_binding_mismatch"}
    ]
    with pytest.raises(ValueError, match="use 'error', 'drop_block' or 'allow'"):
        sim.claude_prefix_mismatch = "sometimes"


def test_rewrite_keeps_cache_marks_out_of_the_pinned_system_prompt(sim: Simulator) -> None:
    sim.reset()
    turn = _two_calls(sim, _engine(sim, "rewrite", prompt_cache=True), "You are verbose.")
    assert sim.requests[-1].body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert SYSTEM_NOTES.require(turn.data)["system"] == [{"type": "text", "text": "You are terse."}]
    assert _thinking_sent(sim.requests[-1].body) == 1


def _sent(sim: Simulator) -> dict[str, Any]:
    body = sim.requests[-1].body
    check_sent("/v1/messages", body)  # a mid-conversation system message is a MessageParam the SDK takes
    return body


@pytest.mark.parametrize("model", ["sim-1", "claude-opus-4-8"])
def test_append_keeps_the_reasoning_and_the_bound_prompt_on_a_model_that_takes_system_messages(
    sim: Simulator, model: str
) -> None:
    sim.reset()
    engine = ClaudeEngine(model, "sk-ant-test", sim.url, thinking_budget=1024, prefix_policy="append")
    turn = _two_calls(sim, engine, "You are verbose.")
    second = _sent(sim)
    assert second["system"] == [{"type": "text", "text": "You are terse."}]  # what the first thought is bound to
    assert second["messages"][-1] == {"role": "system", "content": [{"type": "text", "text": "You are verbose."}]}
    assert _thinking_sent(second) == 1  # no drop
    report = TURN_META_PREFIX_GUARD.require(turn.metadata)
    assert (report["policy"], report["dropped"], report["rewritten"]) == ("append", 0, 1)
    assert "fallback" not in report
    sim.queue(Reply(reasoning="third", text="three"))
    turn.append(Block.user("q3"))
    asyncio.run(with_middleware(engine, system_prompt("You are verbose.")).run_inference(turn))
    third = _sent(sim)
    assert [m["role"] for m in third["messages"]] == ["user", "assistant", "user", "system", "assistant", "user"]
    assert _thinking_sent(third) == 2
    assert INPUT_TRANSFORMATIONS.get(turn.metadata) == []  # Claude dropped nothing either


def test_append_falls_back_to_drop_on_a_model_that_takes_no_system_message(
    sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim.reset()
    engine = ClaudeEngine("claude-sonnet-4-5", "sk-ant-test", sim.url, thinking_budget=1024, prefix_policy="append")
    turn = _two_calls(sim, engine, "You are verbose.")
    second = _sent(sim)
    assert second["system"] == [{"type": "text", "text": "You are verbose."}]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]  # no system message sent
    assert _thinking_sent(second) == 0
    report = TURN_META_PREFIX_GUARD.require(turn.metadata)
    assert (report["policy"], report["dropped"]) == ("append", 1)
    assert report["fallback"] == "claude-sonnet-4-5 takes no mid-conversation system message: dropped instead"
    assert "takes no mid-conversation system message: dropped instead" in caplog.text


def test_the_system_prompt_middleware_can_ask_for_append(sim: Simulator) -> None:
    sim.reset()
    engine = _engine(sim, "drop")  # the engine's own policy would drop
    sim.queue(Reply(reasoning="first thought", text="one"), Reply(reasoning="second thought", text="two"))
    turn = Turn()
    turn.append(Block.user("q1"))
    asyncio.run(with_middleware(engine, system_prompt("You are terse.", policy="append")).run_inference(turn))
    turn.append(Block.user("q2"))
    asyncio.run(with_middleware(engine, system_prompt("You are verbose.", policy="append")).run_inference(turn))
    second = _sent(sim)
    assert second["system"] == [{"type": "text", "text": "You are terse."}]
    assert second["messages"][-1]["role"] == "system" and _thinking_sent(second) == 1
    assert TURN_META_PREFIX_GUARD.require(turn.metadata)["policy"] == "append"
    with pytest.raises(ConfigurationError, match="system_prompt\\(policy='sideways'\\)"):
        system_prompt("x", policy="sideways")


@pytest.mark.parametrize(
    ("model", "takes"),
    [
        ("claude-opus-4-8", True),
        ("claude-opus-5-20261001", True),
        ("claude-sonnet-5", True),
        ("us.anthropic.claude-haiku-5-5", True),
        ("sim-1", True),
        ("claude-opus-4-7", False),
        ("claude-opus-4-80", False),
        ("claude-sonnet-4-5", False),
        ("claude-3-7-sonnet-latest", False),
        ("some-proxy-model", False),
    ],
)
def test_which_models_take_a_system_message(model: str, takes: bool) -> None:
    assert takes_system_messages(model) is takes


@pytest.mark.skipif(not ROOT.is_dir(), reason=MISSING)
def test_append_sends_the_shape_claude_took_in_the_recordings(sim: Simulator) -> None:
    """The recorded Opus 4.8 requests end on a mid-conversation system message after a user turn: the form
    ``append`` sends. The simulator takes them on that model and refuses them on one before it."""
    recorded = [e for e in exchanges() if "test_anthropic_mid_conversation_system" in e.cassette]
    assert recorded
    sim.reset()
    engine = ClaudeEngine("claude-opus-4-8", "sk-ant-test", sim.url, thinking_budget=1024, prefix_policy="append")
    _two_calls(sim, engine, "You are verbose.")
    sent = _sent(sim)["messages"]

    def shape(messages: list[dict[str, Any]]) -> list[Any]:
        return [(m["role"], [c["type"] for c in m["content"]]) for m in messages[-2:]]

    ends = [e.body["messages"] for e in recorded if e.body["messages"][-1]["role"] == "system"]
    assert ends and all(shape(sent) == shape(m) for m in ends)  # [user, system(text)] last, as recorded
    for exchange in recorded:
        for model, status in ((exchange.body["model"], 200), ("claude-sonnet-4-5", 400)):
            sim.queue(Reply(text="ok"))
            body = {**exchange.body, "model": model, "stream": False}
            answer = httpx.post(
                f"{sim.url}/v1/messages", json=body, headers={"x-api-key": "k", "anthropic-version": "1"}
            )
            assert answer.status_code == status, (exchange.name, model, answer.text)
            assert status == 200 or "role 'system' is not supported on this model" in answer.text
        sim.state.replies.clear()
