"""In-request compaction (``compact_threshold``) and token counts (issue 31): the server compacts its copy
of the chain inside a call; the Turn keeps the compaction item as a block of that response, the next
request chains on it, a whole-Turn request replays from the latest one, and the simulator's context
always equals what the Turn says the server holds."""

from __future__ import annotations

from typing import Any

import pytest
from responses_support import assert_valid_requests, engine, normalize, settle

import geppetto as gp
from geppetto import ConfigurationError
from geppetto.engine import Handler
from geppetto.middleware import with_middleware
from geppetto.middleware.compaction import compaction, summarize_with
from geppetto.providers._stateful import ResponsesMetrics
from geppetto.providers.openai_responses import blocks_to_items
from geppetto.providers.openai_responses._items import replayed, server_compaction
from geppetto.providers.openai_responses._request import session_cache_key
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import (
    BLOCK_META_RESPONSE_ID,
    PAYLOAD_ITEM,
    TURN_META_SESSION_ID,
    TURN_META_USAGE,
    Block,
    BlockKind,
    Turn,
)

_RID = str(BLOCK_META_RESPONSE_ID)


@gp.tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def _posts(sim: Simulator) -> list[Any]:
    return [r for r in sim.requests if r.path == "/v1/responses"]


def held_by_turn(turn: Turn) -> list[tuple[Any, ...]]:
    """What the Turn says the server holds after its last response: its blocks up to that response's
    end, from the latest server compaction on."""
    last = max(i for i, b in enumerate(turn.blocks) if b.metadata.get(_RID))
    return normalize(blocks_to_items(replayed(turn.blocks[: last + 1])))


def _held_checker(sim: Simulator, checked: list[str]) -> Any:
    """Middleware right above the engine: after every call the simulator's copy equals what the Turn says."""

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            turn = await next_handler(turn)
            rid = str(turn.blocks[-1].metadata[_RID])
            settle(sim, rid)
            assert normalize(sim.held_items(rid)) == held_by_turn(turn), f"after call {len(checked) + 1}"
            checked.append(rid)
            return turn

        return handler

    return middleware


def _editor(at: int, edits: list[int]) -> Any:
    """Middleware that edits the Turn's first user block before call number ``at``."""
    calls = [0]

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            calls[0] += 1
            if calls[0] == at:
                first = next(b for b in turn.blocks if b.kind is BlockKind.USER)
                first.payload["text"] = first.text + " (edited)"
                edits.append(calls[0])
            return await next_handler(turn)

        return handler

    return middleware


@pytest.mark.slow
async def test_a_300_step_tool_loop_chains_through_every_server_compaction(geppetto_sim: Simulator) -> None:
    sim, steps = geppetto_sim, 300
    sim.queue(*[Reply(tool_calls=[ToolCall("get_weather", {"city": f"city{i}"})]) for i in range(steps - 1)])
    sim.queue(Reply(text="all done"))
    metrics = ResponsesMetrics()
    main = engine(sim, mode="chained", metrics=metrics, compact_threshold=1000)
    checked: list[str] = []
    edits: list[int] = []
    inner = with_middleware(main, _editor(150, edits), _held_checker(sim, checked))
    session = gp.Session(inner, tools=[get_weather], tool_loop_options={"max_iterations": steps + 1})
    session.append(Turn(blocks=[Block.system("You check the weather.")]))
    out = await session.run("Check the weather in 300 cities, one at a time.")

    posts = _posts(sim)
    assert out.blocks[-1].text == "all done" and len(posts) == steps == len(checked) and edits == [150]
    assert all(p.body["context_management"] == [{"type": "compaction", "compact_threshold": 1000}] for p in posts)
    compactions = [b for b in out.blocks if server_compaction(b)]
    assert len(compactions) >= 4
    by_id = {rid: i for i, rid in enumerate(checked)}
    for block in compactions:
        # the compaction item is a block of its response, first in its output, counted in its span
        rid = block.metadata[_RID]
        same = [b for b in out.blocks if b.metadata.get(_RID) == rid]
        assert same[0] is block and block.payload[PAYLOAD_ITEM]["encrypted_content"]
        # the request after every server compaction chains on the compacted response
        following = by_id[rid] + 1
        if following < steps:
            assert posts[following].body.get("previous_response_id") == rid
    # the only request that is not chained, after the first, is the one after the edit (call 150)
    unchained = [i for i, p in enumerate(posts) if not p.body.get("previous_response_id")]
    assert unchained == [0, 149]
    assert metrics.counters["fallback"] == 1
    # that whole-Turn request replays from the latest compaction item: what it replaced is not sent
    resend = posts[149].body["input"]
    assert resend[0]["type"] == "compaction" and set(resend[0]) == {"type", "id", "encrypted_content"}
    assert len(resend) < 150
    # every chained request sends the one new block; the server's copy stays bounded
    assert all(len(p.body["input"]) == 1 for i, p in enumerate(posts) if i not in unchained)
    assert max(len(sim.held_items(rid)) for rid in checked[-100:]) <= max(len(sim.held_items(r)) for r in checked[:100])
    assert_valid_requests(sim)


@pytest.mark.parametrize("store", [True, False])
async def test_a_stateless_turn_replays_from_its_latest_compaction(geppetto_sim: Simulator, store: bool) -> None:
    sim = geppetto_sim
    eng = engine(sim, mode="stateless", compact_threshold=1000, store=store)
    turn = Turn(blocks=[Block.system("You answer."), Block.user("word " * 1200)])
    sim.queue(Reply(text="first answer"))
    await eng.run_inference(turn)
    first = [b for b in turn.blocks if server_compaction(b)]
    assert len(first) == 1 and turn.blocks[2] is first[0] and turn.blocks[3].text == "first answer"
    turn.append(Block.user("and then?"))
    sim.queue(Reply(text="second answer"))
    await eng.run_inference(turn)
    sent = _posts(sim)[-1].body["input"]
    assert [i.get("type", "message") for i in sent] == ["compaction", "message", "message"]
    assert sent[0]["id"] == first[0].payload[PAYLOAD_ITEM]["id"]
    # the model read the compaction item and what follows, nothing it replaced
    rid = str(turn.blocks[-1].metadata[_RID])
    assert normalize(sim.context_items(rid)) == normalize(blocks_to_items(replayed(turn.blocks[:-1])))
    assert_valid_requests(sim)


async def test_under_the_threshold_nothing_is_compacted(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    eng = engine(sim, compact_threshold=5000)
    sim.queue(Reply(text="short"))
    turn = await eng.run_inference(Turn(blocks=[Block.user("hello")]))
    assert not any(server_compaction(b) for b in turn.blocks)
    assert [i["type"] for i in sim.held_items(str(turn.blocks[-1].metadata[_RID]))] == ["message", "message"]


@pytest.mark.parametrize("bad", [999, 0, True, 1500.0, "2000"])
def test_compact_threshold_must_be_a_token_count_the_api_takes(geppetto_sim: Simulator, bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="at least 1000"):
        engine(geppetto_sim, compact_threshold=bad)


async def test_the_simulator_refuses_an_unknown_context_management_entry(geppetto_sim: Simulator) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=geppetto_sim.openai_url) as client:
        answer = await client.post(
            "/responses",
            json={"model": "sim-1", "input": "hi", "context_management": [{"type": "truncate"}]},
            headers={"authorization": "Bearer sk-test"},
        )
    assert answer.status_code == 400
    assert answer.json()["error"]["param"] == "context_management[0].type"


# -- token counts ---------------------------------------------------------------------------------


async def _next_input_tokens(eng: Any, turn: Turn, sim: Simulator, reply: Reply) -> int:
    sim.queue(reply)
    await eng.run_inference(turn)
    usage = TURN_META_USAGE.get(turn.metadata)
    assert usage is not None
    return int(usage["input_tokens"])


@pytest.mark.parametrize("mode", ["chained", "stateless", "conversation"])
async def test_count_tokens_equals_what_the_next_request_reads(geppetto_sim: Simulator, mode: str) -> None:
    sim = geppetto_sim
    eng = engine(sim, mode=mode)
    turn = Turn(blocks=[Block.system("You check the weather."), Block.user("Weather in Paris and Rome?")])
    sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"}, call_id="c1")]))
    await eng.run_inference(turn)
    turn.append(Block.tool_use("c1", "sunny in Paris"))
    counted = await eng.count_tokens(turn)
    count_body = [r for r in sim.requests if r.path == "/v1/responses/input_tokens"][-1].body
    if mode == "chained":  # the server-held prefix is named, not sent again
        assert count_body["previous_response_id"] == turn.blocks[-2].metadata[_RID]
        assert len(count_body["input"]) == 1
    elif mode == "conversation":
        assert count_body["conversation"] and len(count_body["input"]) == 1
    else:
        assert "previous_response_id" not in count_body and len(count_body["input"]) == 4
    assert counted == await _next_input_tokens(eng, turn, sim, Reply(text="sunny"))
    turn.append(Block.user("and Rome?"))
    assert await eng.count_tokens(turn) == await _next_input_tokens(eng, turn, sim, Reply(text="also sunny"))
    assert_valid_requests(sim)


async def test_count_tokens_counts_the_compacted_context(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    eng = engine(sim, compact_threshold=1000)
    turn = Turn(blocks=[Block.user("word " * 1200)])
    sim.queue(Reply(text="ok"))
    await eng.run_inference(turn)
    turn.append(Block.user("more?"))
    counted = await eng.count_tokens(turn)
    assert counted < 300  # the server holds the compaction item, not the 1200 words it replaced
    assert counted == await _next_input_tokens(eng, turn, sim, Reply(text="yes"))


async def test_count_tokens_counts_the_whole_turn_when_the_anchor_expired(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    eng = engine(sim)
    turn = Turn(blocks=[Block.user("hello there")])
    sim.queue(Reply(text="hi"))
    await eng.run_inference(turn)
    rid = str(turn.blocks[-1].metadata[_RID])
    settle(sim, rid)
    sim.forget(rid)
    turn.append(Block.user("again"))
    counted = await eng.count_tokens(turn)
    bodies = [r.body for r in sim.requests if r.path == "/v1/responses/input_tokens"]
    assert bodies[0]["previous_response_id"] == rid and "previous_response_id" not in bodies[1]
    assert counted == await _next_input_tokens(eng, turn, sim, Reply(text="hi again"))


async def test_the_compaction_middleware_counts_tokens_with_the_engine(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(*[Reply(tool_calls=[ToolCall("get_weather", {"city": f"city{i}"})]) for i in range(11)])
    sim.queue(Reply(text="done"))
    main = engine(sim)
    estimates: list[int] = []

    def never(blocks: Any) -> int:
        estimates.append(len(blocks))
        return 0

    inner = with_middleware(main, compaction(main.compact, max_tokens=120, keep_last=2, estimate=never))
    session = gp.Session(inner, tools=[get_weather], tool_loop_options={"max_iterations": 20})
    out = await session.run("Check the weather in twelve cities.")
    counts = [r for r in sim.requests if r.path == "/v1/responses/input_tokens"]
    compacts = [r for r in sim.requests if r.path == "/v1/responses/compact"]
    assert out.blocks[-1].text == "done" and not estimates  # the engine counted; the estimate never ran
    assert len(counts) == 12 and compacts
    assert_valid_requests(sim)


# -- /responses/compact by reference ----------------------------------------------------------------


async def _answered(sim: Simulator, eng: Any, *blocks: Block) -> Turn:
    turn = Turn(blocks=list(blocks))
    for i in range(2):
        sim.queue(Reply(text=f"answer {i}"))
        await eng.run_inference(turn)
        turn.append(Block.user(f"question {i}"))
    return turn


def _compacts(sim: Simulator) -> list[Any]:
    return [r.body for r in sim.requests if r.path == "/v1/responses/compact"]


async def test_compact_names_the_response_that_holds_the_blocks(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    eng = engine(sim, instructions_mode=True)
    turn = await _answered(sim, eng, Block.system("Be brief."), Block.user("hello"))
    blocks = [b for b in turn.blocks if b.kind is not BlockKind.SYSTEM]
    last_rid = turn.blocks[-2].metadata[_RID]
    settle(sim, last_rid)
    TURN_META_SESSION_ID.set(turn.metadata, "session-1")
    out = await eng.compact(blocks, turn)
    (body,) = _compacts(sim)
    # the chain up to the last response is named; only the block after it is sent
    assert body["previous_response_id"] == last_rid
    assert normalize(body["input"]) == [("message", "user", "question 1")]
    assert [b.kind for b in out][-1] is BlockKind.OTHER and [b.text for b in out[:-1]] == [
        "hello",
        "question 0",
        "question 1",
    ]
    assert not any(b.metadata.get(_RID) for b in out)  # the response.compaction id goes on no block
    assert body["prompt_cache_key"] == session_cache_key("session-1")  # the session's cache


async def test_compact_sends_the_blocks_when_it_cannot_name_a_response(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    eng = engine(sim)  # system blocks go in the input: the server holds them, the Turn keeps them
    turn = await _answered(sim, eng, Block.system("Be brief."), Block.user("hello"))
    blocks = [b for b in turn.blocks if b.kind is not BlockKind.SYSTEM]
    await eng.compact(blocks, turn)
    await eng.compact(blocks[1:], turn)  # not the Turn's first blocks
    await eng.compact(blocks)  # no Turn
    assert [("previous_response_id" in b, len(b["input"])) for b in _compacts(sim)] == [
        (False, 5),
        (False, 4),
        (False, 5),
    ]
    assert_valid_requests(sim)


async def test_compact_by_reference_sends_the_blocks_when_the_response_expired(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    eng = engine(sim)
    turn = await _answered(sim, eng, Block.user("hello"))
    rid = str(turn.blocks[-2].metadata[_RID])
    settle(sim, rid)
    sim.forget(rid)
    out = await eng.compact(list(turn.blocks), turn)
    first, second = _compacts(sim)
    assert first["previous_response_id"] == rid
    assert "previous_response_id" not in second and len(second["input"]) == 5
    assert out[-1].payload[PAYLOAD_ITEM]["type"] == "compaction"


@pytest.mark.slow
async def test_validation_with_the_server_matches_through_compactions_and_a_fallback(geppetto_sim: Simulator) -> None:
    sim, steps = geppetto_sim, 120
    sim.queue(*[Reply(tool_calls=[ToolCall("get_weather", {"city": f"city{i}"})]) for i in range(steps - 1)])
    sim.queue(Reply(text="all done"))
    metrics = ResponsesMetrics()
    main = engine(sim, metrics=metrics, compact_threshold=1000, validate_every=1)
    edits: list[int] = []
    session = gp.Session(
        with_middleware(main, _editor(70, edits)), tools=[get_weather], tool_loop_options={"max_iterations": steps + 1}
    )
    out = await session.run("Check the weather in 120 cities, one at a time.")
    assert out.blocks[-1].text == "all done" and edits == [70]
    assert len([b for b in out.blocks if server_compaction(b)]) >= 2
    assert metrics.counters["fallback"] == 1
    # every chained request was checked against the server's copy, and every check matched
    assert metrics.counters["validation:match"] == steps and not metrics.counters.get("validation:mismatch")
    # periodic checks read each link once: about two reads (the response and its input) per request
    gets = [r for r in sim.requests if r.method == "GET"]
    assert len(gets) <= 2 * steps + 10, len(gets)


async def test_compacting_a_turn_the_server_compacted_sends_from_its_latest_compaction(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    eng = engine(sim, compact_threshold=1000)
    turn = Turn(blocks=[Block.system("You answer."), Block.user("word " * 1200)])
    sim.queue(Reply(text="first"))
    await eng.run_inference(turn)
    turn.append(Block.user("next"))
    blocks = [b for b in turn.blocks if b.kind is not BlockKind.SYSTEM]
    out = await eng.compact(blocks, turn)  # system blocks held by the server: sent by value
    (body,) = _compacts(sim)
    assert "previous_response_id" not in body
    assert [i.get("type", "message") for i in body["input"]] == ["compaction", "message", "message"]
    # the 1200 words the server's compaction replaced are not sent again
    assert all("word word" not in str(i.get("content")) for i in body["input"])
    assert [b.text for b in out[:-1]] == ["next"] and out[-1].payload[PAYLOAD_ITEM]["type"] == "compaction"


async def test_a_conversation_compacted_by_the_server_goes_on_with_deltas(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    eng = engine(sim, mode="conversation", compact_threshold=1000)
    turn = Turn(blocks=[Block.user("word " * 1200)])
    sim.queue(Reply(text="first"), Reply(text="second"))
    await eng.run_inference(turn)
    assert server_compaction(turn.blocks[1])
    turn.append(Block.user("next"))
    await eng.run_inference(turn)
    last = _posts(sim)[-1].body
    assert last["conversation"] and normalize(last["input"]) == [("message", "user", "next")]
    rid = str(turn.blocks[-1].metadata[_RID])
    assert normalize(sim.context_items(rid)) == normalize(blocks_to_items(replayed(turn.blocks[:-1])))
    assert_valid_requests(sim)


async def test_the_compaction_middleware_counts_with_the_engine_it_is_given(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(*[Reply(tool_calls=[ToolCall("get_weather", {"city": f"city{i}"})]) for i in range(7)])
    sim.queue(Reply(text="done"))
    main = engine(sim)
    summarizer = gp.ScriptedEngine([Block.llm_text(f"weather checked ({i})") for i in range(8)])
    middleware = compaction(summarize_with(summarizer), max_tokens=100, keep_last=2, engine=main)
    session = gp.Session(
        with_middleware(main, middleware), tools=[get_weather], tool_loop_options={"max_iterations": 10}
    )
    out = await session.run("Check the weather in eight cities.")
    counts = [r for r in sim.requests if r.path == "/v1/responses/input_tokens"]
    assert out.blocks[-1].text == "done" and len(counts) == 8
    assert summarizer.turns  # the count passed 100 tokens, so the summarizer ran
    assert any(b.text.startswith("Summary of the earlier conversation") for b in out.blocks)
