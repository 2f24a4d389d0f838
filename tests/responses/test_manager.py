"""ConversationManager (seed 003, Proposal 5): a caller builds a fresh Turn with only the new blocks each
call and still continues one chain or conversation; and a caller's own conversation id is used."""

from __future__ import annotations

import logging

import httpx
import pytest
from responses_support import assert_valid_requests, engine, normalize

from geppetto.providers.openai_responses import ConversationManager, ConversationState, get_state, set_state
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import BLOCK_META_RESPONSE_ID, Block, BlockKind, Turn

RID = str(BLOCK_META_RESPONSE_ID)


def _fresh(*texts: str) -> Turn:
    turn = Turn()
    for text in texts:
        turn.append(Block.user(text))
    return turn


def _last_rid(turn: Turn) -> str:
    return str(turn.blocks[-1].metadata[RID])


def _responses(sim: Simulator) -> list[dict]:  # type: ignore[type-arg]
    return [r.body for r in sim.requests if r.path == "/v1/responses"]


async def test_chained_fresh_turns_continue_the_chain(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]), Reply(text="Sunny."))
    manager, eng = ConversationManager("chained"), engine(sim)
    first = await manager.run(eng, _fresh("hello"))
    second = await manager.run(eng, _fresh("weather in Paris?"))
    call = second.blocks[-1]
    second.append(Block.tool_use(call.payload["id"], "sunny"))  # the tool loop continues the same fresh Turn
    second = await manager.run(eng, second)
    bodies = _responses(sim)
    assert [b.get("previous_response_id") for b in bodies] == [None, _last_rid(first), str(call.metadata[RID])]
    assert [normalize(b["input"]) for b in bodies] == [
        [("message", "user", "hello")],
        [("message", "user", "weather in Paris?")],
        [("function_call_output", call.payload["id"], "sunny")],
    ]
    assert normalize(sim.context_items(_last_rid(second))) == [
        ("message", "user", "hello"),
        ("message", "assistant", "One."),
        ("message", "user", "weather in Paris?"),
        ("function_call", call.payload["id"], "get_weather", {"city": "Paris"}),
        ("function_call_output", call.payload["id"], "sunny"),
    ]
    assert manager.state == ConversationState("chained", None, _last_rid(second), _last_rid(first))
    assert_valid_requests(sim)


async def test_conversation_fresh_turns_stay_in_one_conversation(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    manager, eng = ConversationManager("conversation"), engine(sim)
    first = await manager.run(eng, _fresh("hello"))
    conv = get_state(first).conversation_id  # type: ignore[union-attr]
    await manager.run(eng, _fresh("more"))
    third = await manager.run(eng, _fresh("again"))
    assert [(r.method, r.path) for r in sim.requests] == [
        ("POST", "/v1/conversations"),
        ("POST", "/v1/responses"),
        ("POST", "/v1/responses"),
        ("POST", "/v1/responses"),
    ]
    bodies = _responses(sim)
    assert [b["conversation"] for b in bodies] == [conv] * 3
    assert [normalize(b["input"]) for b in bodies] == [
        [("message", "user", "hello")],
        [("message", "user", "more")],
        [("message", "user", "again")],
    ]
    assert [t for (_, _, t) in normalize(sim.context_items(_last_rid(third)))] == [
        "hello",
        "One.",
        "more",
        "Two.",
        "again",
    ]
    assert_valid_requests(sim)


async def test_a_fresh_turn_that_changes_before_its_anchor_is_resent_after_its_base(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    manager, eng = ConversationManager("chained"), engine(sim)
    first = await manager.run(eng, _fresh("hello"))
    second = await manager.run(eng, _fresh("more"))
    second.blocks[0].payload["text"] = "more, please"  # middleware edits the fresh Turn before its anchor
    second.append(Block.user("and?"))
    second = await manager.run(eng, second)
    last = _responses(sim)[-1]
    assert last["previous_response_id"] == _last_rid(first)  # the base: the context before this Turn
    assert normalize(last["input"]) == [
        ("message", "user", "more, please"),
        ("message", "assistant", "Two."),
        ("message", "user", "and?"),
    ]
    assert [t for (_, _, t) in normalize(sim.context_items(_last_rid(second)))] == [
        "hello",
        "One.",
        "more, please",
        "Two.",
        "and?",
    ]


async def test_a_turn_with_its_own_state_keeps_it(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."))
    manager, eng = ConversationManager("chained"), engine(sim)
    turn = await manager.run(eng, _fresh("hello"))
    turn.append(Block.user("more"))  # the caller keeps the returned Turn: anchors apply, no base
    await manager.run(eng, turn)
    assert normalize(_responses(sim)[-1]["input"]) == [("message", "user", "more")]
    assert get_state(turn).base is None  # type: ignore[union-attr]


async def test_a_state_naming_a_response_without_base_does_not_continue_it(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    """previous_response_id is a record, not an instruction: middleware may have removed every response block."""
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."))
    eng = engine(sim)
    turn = await eng.run_inference(_fresh("hello"))
    turn.blocks[:] = [Block.user("summary of the chat so far"), Block.user("next?")]
    with caplog.at_level(logging.INFO, logger="geppetto.providers.openai_responses"):
        await eng.run_inference(turn)
    assert "previous_response_id" not in _responses(sim)[-1]
    assert "set ConversationState(base=...)" in caplog.text


def _new_conversation(sim: Simulator, items: list[dict] | None = None) -> str:  # type: ignore[type-arg]
    answer = httpx.post(
        f"{sim.openai_url}/conversations", json={"items": items or []}, headers={"authorization": "Bearer k"}
    )
    return str(answer.json()["id"])


async def test_a_callers_empty_conversation_is_used(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    conv = _new_conversation(sim)
    sim.queue(Reply(text="One."))
    turn = _fresh("hello", "are you there?")
    set_state(turn, ConversationState("conversation", conversation_id=conv))
    turn = await engine(sim).run_inference(turn)
    assert get_state(turn).conversation_id == conv  # type: ignore[union-attr]
    calls = [(r.method, r.path) for r in sim.requests[1:]]
    assert calls == [
        ("GET", f"/v1/conversations/{conv}/items"),
        ("POST", f"/v1/conversations/{conv}/items"),
        ("POST", "/v1/responses"),
    ]
    assert [t for (_, _, t) in normalize(sim.context_items(_last_rid(turn)))] == ["hello", "are you there?"]


async def test_a_callers_conversation_holding_other_items_is_replaced_and_logged(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim = geppetto_sim
    conv = _new_conversation(sim, [{"role": "user", "content": "something else"}])
    sim.queue(Reply(text="One."))
    turn = _fresh("hello")
    set_state(turn, ConversationState("conversation", conversation_id=conv))
    with caplog.at_level(logging.WARNING, logger="geppetto.providers.openai_responses"):
        turn = await engine(sim).run_inference(turn)
    assert get_state(turn).conversation_id not in (None, conv)  # type: ignore[union-attr]
    assert f"no block of the Turn was answered in conversation {conv}" in caplog.text
    assert "conversation_not_empty" in caplog.text
    assert [t for (_, _, t) in normalize(sim.context_items(_last_rid(turn)))] == ["hello"]


async def test_a_callers_conversation_with_base_receives_the_fresh_turn(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    conv = _new_conversation(sim, [{"role": "user", "content": "earlier"}])
    sim.queue(Reply(text="One."))
    manager = ConversationManager("conversation", conversation_id=conv)
    turn = await manager.run(engine(sim), _fresh("hello"))
    assert [b.kind for b in turn.blocks] == [BlockKind.USER, BlockKind.LLM_TEXT]
    assert [t for (_, _, t) in normalize(sim.context_items(_last_rid(turn)))] == ["earlier", "hello"]
