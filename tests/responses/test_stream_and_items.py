"""Stream handling (complete, incomplete, failed, broken, malformed) and the block -> item pairing rules."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from responses_support import engine

import geppetto as gp
from geppetto.events import Event, with_sinks
from geppetto.providers._http import HttpTransport
from geppetto.providers._retry import RetryPolicy
from geppetto.providers.openai_responses import ResponsesEngine, blocks_to_items, find_best_anchor
from geppetto.providers.openai_responses._request import scan_anchors
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import BLOCK_META_RESPONSE_ID, TURN_META_STOP_REASON, TURN_META_USAGE, Block, BlockKind, Turn


def _sse(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


RESPONSE: dict[str, Any] = {
    "id": "resp_1",
    "object": "response",
    "status": "in_progress",
    "output": [],
    "previous_response_id": None,
}
CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": ""}
MSG = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Hello", "annotations": []}],
}


def _engine_for(body: bytes) -> ResponsesEngine:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    http = HttpTransport(
        "http://test/v1", provider="openai", transport=httpx.MockTransport(handler), retry=RetryPolicy(max_retries=0)
    )
    return ResponsesEngine("gpt-4.1", api_key="k", http=http)


def _turn() -> Turn:
    turn = Turn()
    turn.append(Block.user("hi"))
    return turn


async def test_incomplete_response_records_usage_and_stop_reason_and_drops_incomplete_calls() -> None:
    final = {
        **RESPONSE,
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [MSG, {**CALL, "arguments": '{"ci', "status": "incomplete"}],
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 4},
            "output_tokens": 7,
            "output_tokens_details": {"reasoning_tokens": 3},
            "total_tokens": 17,
        },
    }
    body = _sse(
        {"type": "response.created", "sequence_number": 0, "response": RESPONSE},
        {"type": "response.output_item.added", "output_index": 0, "item": {**MSG, "content": []}},
        {"type": "response.output_text.delta", "output_index": 0, "item_id": "msg_1", "delta": "Hel"},
        {"type": "response.output_text.delta", "output_index": 0, "item_id": "msg_1", "delta": "lo"},
        {"type": "response.output_item.done", "output_index": 0, "item": MSG},
        {"type": "response.incomplete", "response": final},
    )
    seen: list[Event] = []
    with with_sinks(seen.append):
        turn = await _engine_for(body).run_inference(_turn())
    assert [(b.kind, b.payload) for b in turn.blocks[1:]] == [
        (BlockKind.LLM_TEXT, {"text": "Hello", "item_id": "msg_1"})
    ]
    assert TURN_META_STOP_REASON.get(turn.metadata) == "max_tokens"
    assert TURN_META_USAGE.get(turn.metadata) == {
        "input_tokens": 10,
        "output_tokens": 7,
        "cached_tokens": 4,
        "reasoning_tokens": 3,
        "cache_write_tokens": 0,
    }
    assert [e.type for e in seen] == ["start", "text_delta", "text_delta", "final"]
    assert seen[-1].metadata.stop_reason == "max_tokens"


@pytest.mark.parametrize(
    ("tail", "match"),
    [
        ([], "ended without response.completed"),
        (
            [
                {
                    "type": "response.failed",
                    "response": {
                        **RESPONSE,
                        "status": "failed",
                        "error": {"code": "server_error", "message": "model broke"},
                    },
                }
            ],
            "model broke",
        ),
        ([{"type": "error", "code": "ERR", "message": "Something went wrong", "param": None}], "Something went wrong"),
    ],
)
async def test_broken_streams_raise_and_keep_only_finished_messages(tail: list[dict[str, Any]], match: str) -> None:
    body = _sse(
        {"type": "response.created", "response": RESPONSE},
        {"type": "response.output_item.done", "output_index": 0, "item": MSG},
        {"type": "response.output_item.added", "output_index": 1, "item": CALL},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_1", "delta": '{"ci'},
        *tail,
    )
    turn = _turn()
    with pytest.raises(gp.StreamError, match=match) as info:
        await _engine_for(body).run_inference(turn)
    assert [b.kind for b in turn.blocks] == [BlockKind.USER, BlockKind.LLM_TEXT]
    assert "finished items: ['message']" in str(info.value)


async def test_malformed_event_is_a_stream_error() -> None:
    body = _sse({"type": "response.created", "response": RESPONSE}) + b"data: {not json\n\n"
    with pytest.raises(gp.StreamError, match="malformed event data"):
        await _engine_for(body).run_inference(_turn())


async def test_simulator_dropped_stream_leaves_no_tool_call(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]))
    geppetto_sim.fail_next(drop_after=4)
    turn = _turn()
    with pytest.raises(gp.StreamError):
        await engine(geppetto_sim).run_inference(turn)
    assert [b.kind for b in turn.blocks] == [BlockKind.USER]


async def test_simulator_429_is_retried(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="ok"))
    geppetto_sim.fail_next(status=429, retry_after=0.01)
    turn = await engine(geppetto_sim).run_inference(_turn())
    assert (turn.blocks[-1].text, len(geppetto_sim.requests)) == ("ok", 2)


def test_items_bytes_is_the_size_of_the_items_and_frozen_blocks_remember_theirs() -> None:
    from geppetto.providers.openai_responses._items import items_bytes
    from geppetto.turns._cow import freeze_block

    reasoning = Block.reasoning("t", item_id="rs_1", encrypted_content="enc1", summary=["s"])
    text = Block.llm_text("answer é", item_id="msg_1")
    for b in (reasoning, text):
        BLOCK_META_RESPONSE_ID.set(b.metadata, "resp_1")
    blocks = [Block.system("sys"), Block.user("q"), reasoning, text, Block.llm_text("  "), Block.tool_use("c", None)]
    frozen = [freeze_block(b) for b in blocks]
    assert blocks_to_items(blocks)[2]["type"] == "reasoning"  # paired with the answer that follows it
    for system in (True, False):
        for some in (blocks, frozen, frozen, frozen[1:], frozen[3:], []):  # frozen twice: the second from memory
            items = blocks_to_items(some, include_system=system)
            wire = json.dumps(items, separators=(",", ":"), ensure_ascii=False).encode()
            assert items_bytes(some, include_system=system) == len(wire)
    assert "item_bytes" in frozen[3].__dict__ and "item_bytes" not in blocks[3].__dict__


def test_items_pairing_rules() -> None:
    r_ok = Block.reasoning("secret thoughts", item_id="rs_1", encrypted_content="enc1", summary=["s"])
    r_plain = Block.reasoning("plaintext only", item_id="rs_2")
    r_orphan = Block.reasoning(item_id="rs_3", encrypted_content="enc3")
    blocks = [
        Block.system("sys"),
        Block.user("q", images=[{"url": "https://x/img.png"}]),
        r_ok,
        Block.tool_call("call_1", "f", {"a": 1}, item_id="fc_1"),
        Block.tool_use("call_1", {"x": 2}),
        r_plain,
        Block.llm_text("answer", item_id="msg_1"),
        Block.llm_text("   "),
        r_orphan,
        Block.tool_use("call_2", None, error="boom"),
        Block(BlockKind.OTHER, {"text": "x"}),
    ]
    assert blocks_to_items(blocks) == [
        {"role": "system", "content": "sys"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "q"},
                {"type": "input_image", "detail": "auto", "image_url": "https://x/img.png"},
            ],
        },
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "s"}],
            "encrypted_content": "enc1",
        },
        {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": '{"a":1}', "id": "fc_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": '{"x": 2}'},
        {"role": "assistant", "content": "answer"},
        {"type": "function_call_output", "call_id": "call_2", "output": '{"error": "boom"}'},
    ]
    assert blocks_to_items(blocks[:1], include_system=False) == []
    assert "secret thoughts" not in json.dumps(blocks_to_items(blocks))


def test_reasoning_pairs_only_with_an_item_of_its_own_response() -> None:
    """Middleware that drops a response's message can leave its reasoning right before another response's
    message; the server refuses that message with the wrong reasoning, so neither goes as a pair."""
    reasoning = Block.reasoning(item_id="rs_1", encrypted_content="enc1")
    own = Block.llm_text("mine", item_id="msg_1")
    other = Block.llm_text("theirs", item_id="msg_2")
    BLOCK_META_RESPONSE_ID.set(reasoning.metadata, "resp_1")
    BLOCK_META_RESPONSE_ID.set(own.metadata, "resp_1")
    BLOCK_META_RESPONSE_ID.set(other.metadata, "resp_2")
    paired = blocks_to_items([reasoning, own])
    assert [(i.get("type"), i.get("id")) for i in paired] == [("reasoning", "rs_1"), ("message", "msg_1")]
    assert blocks_to_items([reasoning, other]) == [{"role": "assistant", "content": "theirs"}]


def test_temperature_omitted_for_reasoning_models() -> None:
    from geppetto.providers.openai_responses._request import Plan

    plan = Plan("stateless", [])
    plain = ResponsesEngine("gpt-4.1", api_key="k", temperature=0.2, top_p=0.9).build_body(Turn(), plan)
    reasoning = ResponsesEngine(
        "o3-mini", api_key="k", temperature=0.2, reasoning_effort="low", text_format={"type": "json_object"}
    ).build_body(Turn(), plan)
    assert plain == {"model": "gpt-4.1", "input": [], "temperature": 0.2, "top_p": 0.9, "stream": True}
    assert reasoning == {
        "model": "o3-mini",
        "input": [],
        "text": {"format": {"type": "json_object"}},
        "reasoning": {"effort": "low"},
        "stream": True,
    }


WEB_SEARCH = {
    "type": "web_search_call",
    "id": "ws_1",
    "status": "completed",
    "action": {"type": "search", "query": "weather in Paris"},
}


def _answering(output: list[dict[str, Any]], status: str = "completed") -> tuple[ResponsesEngine, list[Any]]:
    """An engine whose server answers every request with ``output``; the request bodies land in the list."""
    bodies: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        rid = f"resp_{len(bodies)}"
        created = {**RESPONSE, "id": rid, "previous_response_id": bodies[-1].get("previous_response_id")}
        final = {**created, "status": status, "output": output}
        terminal = "response.completed" if status == "completed" else "response.incomplete"
        body = _sse({"type": "response.created", "response": created}, {"type": terminal, "response": final})
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    http = HttpTransport(
        "http://test/v1", provider="openai", transport=httpx.MockTransport(handler), retry=RetryPolicy(max_retries=0)
    )
    return ResponsesEngine("gpt-4.1", api_key="k", http=http), bodies


async def test_hosted_tool_items_are_kept_replayed_and_fingerprinted() -> None:
    eng, bodies = _answering([WEB_SEARCH, MSG])
    turn = await eng.run_inference(_turn())
    assert [(b.kind, b.payload) for b in turn.blocks[1:]] == [
        (
            BlockKind.OTHER,
            {
                "item": WEB_SEARCH,
                "builtin": {
                    "tool": "web_search",
                    "phase": "call",
                    "call_id": "ws_1",
                    "input": {"type": "search", "query": "weather in Paris"},
                },
            },
        ),
        (BlockKind.LLM_TEXT, {"text": "Hello", "item_id": "msg_1"}),
    ]
    assert find_best_anchor(turn) == "resp_1"
    assert blocks_to_items(turn.blocks) == [
        {"role": "user", "content": "hi"},
        WEB_SEARCH,
        {"role": "assistant", "content": "Hello"},
    ]
    turn.append(Block.user("more"))
    await eng.run_inference(turn)
    assert (bodies[1]["previous_response_id"], bodies[1]["input"]) == ("resp_1", [{"role": "user", "content": "more"}])
    del turn.blocks[1]  # middleware drops the web search: the server still holds it
    assert find_best_anchor(turn) is None


@pytest.mark.parametrize(
    ("output", "status", "kept"),
    [
        ([MSG, {**CALL, "arguments": '{"ci', "status": "incomplete"}], "incomplete", [BlockKind.LLM_TEXT]),
        (
            [{"type": "computer_call", "id": "cu_1", "call_id": "call_c", "status": "completed"}, MSG],
            "completed",
            [
                BlockKind.OTHER,
                BlockKind.LLM_TEXT,
            ],
        ),
    ],
)
async def test_a_response_the_turn_cannot_replay_whole_never_anchors(
    output: list[dict[str, Any]], status: str, kept: list[BlockKind]
) -> None:
    """An incomplete function call is dropped from the Turn, and a call needing a client output is kept but
    never sent: the server holds more than the Turn replays, so the next request sends the whole Turn."""
    eng, bodies = _answering(output, status)
    turn = await eng.run_inference(_turn())
    assert [b.kind for b in turn.blocks[1:]] == kept
    assert (find_best_anchor(turn), scan_anchors(turn).reason_code()) == (None, "not_anchorable")
    turn.append(Block.user("more"))
    await eng.run_inference(turn)
    assert "previous_response_id" not in bodies[1]
    assert bodies[1]["input"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "more"},
    ]
