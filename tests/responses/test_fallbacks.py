"""Fallbacks: never an empty delta; reasoning by item_reference on a whole-Turn resend (and without it
when the item is gone); a conversation that no longer exists."""

from __future__ import annotations

import logging

import httpx
import pytest
from responses_support import assert_valid_requests, engine, normalize, settle, wire_before_last_response

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesMetrics, get_state
from geppetto.providers.openai_responses._items import RESPONSE_BLOCKS
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import PAYLOAD_ENCRYPTED_CONTENT, Block, BlockKind, Turn

LOGGER = "geppetto.providers.openai_responses"


def _start() -> Turn:
    turn = Turn()
    turn.append(Block.system("be terse"))
    turn.append(Block.user("hi"))
    return turn


def _responses(sim: Simulator) -> list[dict]:  # type: ignore[type-arg]
    return [r.body for r in sim.requests if r.path == "/v1/responses"]


@pytest.mark.parametrize("mode", ["chained", "conversation"])
async def test_nothing_new_after_the_anchor_sends_the_whole_turn_not_an_empty_input(
    geppetto_sim: Simulator, mode: str
) -> None:
    """E.g. asking again after a truncated answer: the model gets the same context as in stateless mode."""
    sim = geppetto_sim
    sim.reject_empty_input = True
    sim.queue(Reply(text="One, two, thr", stop="max_tokens"), Reply(text="ee."))
    m = ResponsesMetrics()
    eng = engine(sim, mode=mode, metrics=m)
    turn = await eng.run_inference(_start())
    turn = await eng.run_inference(turn)
    bodies = _responses(sim)
    assert all(b["input"] for b in bodies) and "previous_response_id" not in bodies[1]
    assert [t for (_, _, t) in normalize(sim.context_items(str(get_state(turn).previous_response_id)))] == [  # type: ignore[union-attr]
        "be terse",
        "hi",
        "One, two, thr",
    ]
    assert m.snapshot()["counters"]["fallback:empty_delta"] == 1
    assert turn.blocks[-1].text == "ee."


async def test_nothing_new_after_pending_tool_calls_is_a_usage_error(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]))
    eng = engine(sim)
    turn = await eng.run_inference(_start())
    with pytest.raises(gp.UsageError, match=r"tool calls that have no result \(call_.*Block.tool_use"):
        await eng.run_inference(turn)
    assert len(sim.requests) == 1


async def test_an_empty_turn_is_a_usage_error(geppetto_sim: Simulator) -> None:
    with pytest.raises(gp.UsageError, match="nothing to send"):
        await engine(geppetto_sim).run_inference(Turn())
    assert geppetto_sim.requests == []


async def test_whole_turn_resend_references_reasoning_that_has_no_encrypted_content(geppetto_sim: Simulator) -> None:
    """With store=True the server keeps reasoning items, so a resend can reference them by id
    (provider-apis §2.4/§2.5) instead of dropping them."""
    sim = geppetto_sim
    sim.queue(Reply(text="One.", reasoning="let me think"), Reply(text="Two."))
    eng = engine(sim)
    turn = await eng.run_inference(_start())
    reasoning = turn.blocks[2]
    assert reasoning.kind is BlockKind.REASONING and RESPONSE_BLOCKS.get(reasoning.metadata) == 2
    del reasoning.payload[PAYLOAD_ENCRYPTED_CONTENT]  # e.g. a server that returns it only on request
    # middleware edit after the reasoning (an edit before it would make the reasoning stale: the prefix
    # guard would leave it out): the response is no anchor any more, the whole Turn goes again
    turn.blocks[3].payload["text"] = "One!"
    turn.append(Block.user("more"))
    turn = await eng.run_inference(turn)
    sent = _responses(sim)[1]["input"]
    assert sent[2:4] == [
        {"type": "item_reference", "id": reasoning.payload["item_id"]},
        {"type": "message", "id": turn.blocks[3].payload["item_id"], "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "One!", "annotations": [], "logprobs": []}]},
    ]  # fmt: skip
    rid, wire = wire_before_last_response(turn)
    assert ("reasoning", reasoning.payload["item_id"]) in normalize(sim.context_items(rid)) == wire
    assert_valid_requests(sim)


async def test_a_referenced_item_that_is_gone_is_resent_without_it(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="Two."))
    turn = _start()
    gone = turn.append(Block.reasoning(item_id="rs_expired"))
    RESPONSE_BLOCKS.set(gone.metadata, 2)  # from a stored response, since expired
    turn.append(Block.llm_text("One.", item_id="msg_expired"))
    turn.append(Block.user("more"))
    m = ResponsesMetrics()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        turn = await engine(sim, mode="stateless", metrics=m).run_inference(turn)
    first, second = (normalize(b["input"]) for b in _responses(sim))
    assert _responses(sim)[0]["input"][2] == {"type": "item_reference", "id": "rs_expired"}
    assert first[2] == ("reasoning", "rs_expired") and ("reasoning", "rs_expired") not in second
    assert second[2] == ("message", "assistant", "One.")
    assert m.snapshot()["counters"]["fallback:item_not_found"] == 1
    assert [r.levelname for r in caplog.records] == ["ERROR", "WARNING"]
    assert turn.blocks[-1].text == "Two."


async def test_a_conversation_that_no_longer_exists_is_replaced(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="One."), Reply(text="Two."))
    m = ResponsesMetrics()
    eng = engine(sim, mode="conversation", metrics=m)
    turn = await eng.run_inference(_start())
    old = str(get_state(turn).conversation_id)  # type: ignore[union-attr]
    settle(sim, str(get_state(turn).previous_response_id))  # type: ignore[union-attr]
    async with httpx.AsyncClient() as client:
        await client.delete(f"{sim.openai_url}/conversations/{old}", headers={"authorization": "Bearer k"})
    turn.append(Block.user("more"))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        turn = await eng.run_inference(turn)
    new = get_state(turn).conversation_id  # type: ignore[union-attr]
    assert new not in (None, old) and turn.blocks[-1].text == "Two."
    assert [(r.method, r.path) for r in sim.requests[2:]] == [
        ("DELETE", f"/v1/conversations/{old}"),
        ("POST", "/v1/responses"),  # rejected: 404 conversation not found
        ("POST", "/v1/conversations"),
        ("POST", "/v1/responses"),
    ]
    assert m.snapshot()["counters"]["fallback:conversation_not_found"] == 1
    assert [r.levelname for r in caplog.records] == ["ERROR", "WARNING"]
    assert f"Conversation with id '{old}' not found" in caplog.records[0].getMessage()
    rid, wire = wire_before_last_response(turn)
    assert normalize(sim.context_items(rid)) == wire
    assert_valid_requests(sim)


@pytest.mark.parametrize("middleware", ["edit_answer", "split_pair"])
async def test_a_whole_turn_resend_replays_encrypted_reasoning_only_next_to_its_item(
    geppetto_sim: Simulator, middleware: str
) -> None:
    """Upstream lessons §4.2 on a fallback: reasoning goes with its encrypted_content right before the item
    it produced, which keeps its id; once middleware separates the two, the reasoning is left out and the
    message goes without its id (the API rejects either half of a pair alone). The edit is to the answer, after
    the reasoning: one before it would leave the reasoning stale (the prefix guard's test_prefix_guard_openai)."""
    sim = geppetto_sim
    sim.queue(Reply(text="One.", reasoning="let me think"), Reply(text="Two."))
    m = ResponsesMetrics()
    eng = engine(sim, metrics=m)
    turn = await eng.run_inference(_start())
    reasoning, message = turn.blocks[2], turn.blocks[3]
    assert reasoning.kind is BlockKind.REASONING and reasoning.payload[PAYLOAD_ENCRYPTED_CONTENT]
    if middleware == "edit_answer":
        message.payload["text"] = "One!"
    else:
        turn.insert(3, Block.user("a note between the reasoning and its answer"))
    turn.append(Block.user("more"))
    turn = await eng.run_inference(turn)
    body = _responses(sim)[1]
    assert "previous_response_id" not in body and m.snapshot()["counters"]["fallback"] == 1
    if middleware == "edit_answer":
        assert body["input"][2:4] == [
            {
                "type": "reasoning",
                "id": reasoning.payload["item_id"],
                "summary": [{"type": "summary_text", "text": "let me think"}],
                "encrypted_content": reasoning.payload[PAYLOAD_ENCRYPTED_CONTENT],
            },
            {
                "type": "message",
                "id": message.payload["item_id"],
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "One!", "annotations": [], "logprobs": []}],
            },
        ]
    else:
        assert not [i for i in body["input"] if i.get("type") in ("reasoning", "item_reference")]
        assert body["input"][2:5] == [
            {"role": "user", "content": "a note between the reasoning and its answer"},
            {"role": "assistant", "content": "One."},
            {"role": "user", "content": "more"},
        ]
    rid, wire = wire_before_last_response(turn)
    assert normalize(sim.context_items(rid)) == wire
    assert_valid_requests(sim)
