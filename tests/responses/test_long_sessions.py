"""Long conversations (issue 20): the anchor check reads only new blocks across a session's requests, and
history compaction keeps a 500-step tool loop bounded while the server's context always equals the Turn
and chaining resumes right after every compaction."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from responses_support import assert_valid_requests, engine, normalize, settle, wire_before_last_response

import geppetto as gp
from geppetto.engine import Handler
from geppetto.middleware import with_middleware
from geppetto.middleware.compaction import COMPACTION, SUMMARY_HEADER, compaction, compaction_range, summarize_with
from geppetto.providers._chain import AnchorScan
from geppetto.providers._stateful import ResponsesMetrics
from geppetto.providers.openai_responses import ResponsesEngine, _request
from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.turns import BLOCK_META_RESPONSE_ID, PAYLOAD_ID, Block, BlockKind, Turn


@gp.tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


@pytest.fixture(scope="module")
def summarizer_sim() -> Iterator[Simulator]:
    with serve() as s:
        yield s


def _scans(monkeypatch: pytest.MonkeyPatch) -> list[AnchorScan]:
    """Every anchor scan the engine runs, in order."""
    seen: list[AnchorScan] = []
    real = _request.scan_anchors

    def recording(*args: Any, **kw: Any) -> AnchorScan:
        scan = real(*args, **kw)
        seen.append(scan)
        return scan

    monkeypatch.setattr(_request, "scan_anchors", recording)
    return seen


def _context_checker(sim: Simulator, checked: list[int]) -> Any:
    """Middleware right above the engine: after every call the simulator's context equals the Turn."""

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            turn = await next_handler(turn)
            rid, wire = wire_before_last_response(turn)
            assert normalize(sim.context_items(rid)) == wire
            checked.append(len(turn.blocks))
            return turn

        return handler

    return middleware


def _responses_posts(sim: Simulator) -> list[Any]:
    return [r for r in sim.requests if r.path == "/v1/responses"]


async def test_a_session_reads_only_new_blocks_from_one_prompt_to_the_next(
    geppetto_sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = geppetto_sim
    scans = _scans(monkeypatch)
    session = gp.Session(engine(sim, mode="chained"), tools=[get_weather])
    for i in range(4):
        sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": f"c{i}"})]), Reply(text=f"sunny {i}"))
        out = await session.run(f"weather {i}?")
    # the first request proves the Turn; every later one (tool steps and next prompts, whose Turns are
    # clones) reads only the blocks after what the request before it proved
    assert [s.rescanned for s in scans] == [True] + [False] * 7
    assert all(s.hashed <= 3 for s in scans[1:])
    rid, wire = wire_before_last_response(out)
    assert normalize(sim.context_items(rid)) == wire
    assert all(r.body.get("previous_response_id") for r in _responses_posts(sim)[1:])


async def test_a_stateless_session_hashes_only_new_blocks_and_its_fingerprints_hold(
    geppetto_sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = geppetto_sim
    encoded: list[Block] = []
    real = _request._fresh_wire

    def counting(block: Block, include_system: bool) -> bytes | None:
        encoded.append(block)
        return real(block, include_system)

    monkeypatch.setattr(_request, "_fresh_wire", counting)
    session = gp.Session(engine(sim, mode="stateless"), tools=[get_weather])
    per_prompt = []
    for i in range(6):
        sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": f"c{i}"})]), Reply(text=f"sunny {i}"))
        before = len(encoded)
        out = await session.run(f"weather {i}?")
        per_prompt.append(len(encoded) - before)
    # each prompt adds four blocks in two responses: what their fingerprints take is the same at the sixth
    # prompt as at the second, not the whole Turn again
    assert per_prompt[1:] == [per_prompt[1]] * 5 and per_prompt[1] <= 8
    assert not any(r.body.get("previous_response_id") for r in _responses_posts(sim))
    # the fingerprints are those a scan from scratch checks: the last response is a valid anchor
    plain = Turn(blocks=[copy.deepcopy(b) for b in out.blocks])
    assert _request.scan_anchors(plain).best() == out.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]


def test_the_cut_keeps_system_blocks_pairs_and_the_last_steps() -> None:
    blocks = [Block.system("s"), Block.user("q1"), Block.llm_text("a1"), Block.user("q2")]
    blocks += [Block.tool_call("c1", "f", {}), Block.tool_call("c2", "f", {})]
    blocks += [Block.tool_use("c2", "r2"), Block.system("s2"), Block.tool_use("c1", "r1")]
    blocks += [Block.reasoning(item_id="rs_1"), Block.llm_text("a2"), Block.user("q3")]
    # steps: q1, a1, q2, (c1 c2), (rs a2), q3; keeping 3 would cut inside the parallel calls' results
    assert compaction_range(blocks, 3) == (1, 4)
    assert compaction_range(blocks, 2) == (1, 9)  # reasoning opens the kept step with its message
    assert compaction_range(blocks, 6) is None
    assert compaction_range([Block.system("s"), Block.user("q"), Block.user("q2")], 1) is None  # one block only


@pytest.mark.slow
async def test_a_500_step_tool_loop_stays_bounded_and_chains_again_after_every_compaction(
    geppetto_sim: Simulator, summarizer_sim: Simulator
) -> None:
    sim, steps = geppetto_sim, 500
    sim.queue(*[Reply(tool_calls=[ToolCall("get_weather", {"city": f"city{i}"})]) for i in range(steps - 1)])
    sim.queue(Reply(text="all done"))
    # the summarizing model answers in a few words (the simulator's unscripted model would echo the
    # transcript, summary included, so its "summary" would grow with every compaction)
    summarizer_sim.reset()
    summarizer_sim.queue(*[Reply(text=f"Checked the weather in many cities (summary {i}).") for i in range(50)])
    metrics = ResponsesMetrics()
    main = engine(sim, mode="chained", metrics=metrics)
    summarizer = ResponsesEngine("sim-1", api_key="sk-test", base_url=summarizer_sim.openai_url, mode="stateless")
    checked: list[int] = []
    inner = with_middleware(
        main, compaction(summarize_with(summarizer), max_blocks=100, keep_last=8), _context_checker(sim, checked)
    )
    session = gp.Session(inner, tools=[get_weather], tool_loop_options={"max_iterations": steps + 1})
    session.append(Turn(blocks=[Block.system("You check the weather.")]))
    out = await session.run("Check the weather in 500 cities, one at a time.")

    posts = _responses_posts(sim)
    summaries = [r for r in summarizer_sim.requests if r.path == "/v1/responses"]
    assert out.blocks[-1].text == "all done" and len(posts) == steps == len(checked)
    compactions = len(summaries)
    assert compactions >= 5
    # one whole-Turn request per compaction (the first request is the chain's start); every other chains
    full = [i for i, r in enumerate(posts) if not r.body.get("previous_response_id")]
    assert len(full) == 1 + compactions
    assert all(posts[i + 1].body.get("previous_response_id") for i in full[1:])
    assert metrics.counters["fallback"] == compactions
    # bytes per request stay bounded: the largest request of the last 100 is about the largest of the first
    # 200 (city numbers grow a digit), and the Turn never passes the size it is compacted at (plus a step)
    assert max(r.size for r in posts[-100:]) <= 1.05 * max(r.size for r in posts[:200])
    assert max(checked) <= 100 + 2
    assert out.blocks[0].kind is BlockKind.SYSTEM and out.blocks[1].text.startswith(SUMMARY_HEADER)
    replaced = COMPACTION.get(out.blocks[1].metadata)
    assert replaced is not None and replaced["compactor"] == "summarize_with" and len(replaced["replaced"]) > 50
    assert_valid_requests(sim)


async def test_openai_compaction_replays_its_item_and_chains_again(geppetto_sim: Simulator) -> None:
    sim, steps = geppetto_sim, 120
    sim.queue(*[Reply(tool_calls=[ToolCall("get_weather", {"city": f"city{i}"})]) for i in range(steps - 1)])
    sim.queue(Reply(text="all done"))
    metrics = ResponsesMetrics()
    main = engine(sim, mode="chained", metrics=metrics)
    checked: list[int] = []
    inner = with_middleware(main, compaction(main.compact, max_blocks=40, keep_last=4), _context_checker(sim, checked))
    session = gp.Session(inner, tools=[get_weather], tool_loop_options={"max_iterations": steps + 1})
    out = await session.run("Check the weather in 120 cities.")

    compacts = [r for r in sim.requests if r.path == "/v1/responses/compact"]
    posts = _responses_posts(sim)
    assert len(posts) == steps == len(checked) and len(compacts) >= 3
    assert metrics.counters["fallback"] == len(compacts)
    items = [b.payload["item"] for b in out.blocks if b.kind is BlockKind.OTHER]
    assert [i["type"] for i in items] == ["compaction"] and items[0]["encrypted_content"]
    assert out.blocks[0].text == "Check the weather in 120 cities."  # the user message the API keeps
    for request in compacts:  # by reference: a stored response of the chain, and at most the blocks after it
        assert request.body["previous_response_id"] in sim.state.responses
        assert {i.get("type") for i in request.body.get("input", [])} <= {"function_call_output"}
    # a /responses/compact id is never chained on: every parent a request names is a stored response
    assert all(r.body["previous_response_id"] in sim.state.responses for r in posts if "previous_response_id" in r.body)
    assert_valid_requests(sim)


async def test_a_failing_compactor_leaves_the_turn_as_it_was(geppetto_sim: Simulator) -> None:
    async def broken(blocks: list[Block], turn: Turn) -> list[Block]:
        raise RuntimeError("summarizer down")

    turn = Turn()
    for i in range(6):
        turn.append(Block.user(f"q{i}"))
        turn.append(Block.llm_text(f"a{i}"))
    before = [b.id for b in turn.blocks]
    wrapped = with_middleware(engine(geppetto_sim), compaction(broken, max_blocks=4, keep_last=2))
    with pytest.raises(RuntimeError, match="summarizer down"):
        await wrapped.run_inference(turn)
    assert [b.id for b in turn.blocks] == before


def test_compaction_needs_a_size() -> None:
    with pytest.raises(gp.UsageError, match="max_blocks=N or max_tokens=N"):
        compaction(summarize_with(gp.ScriptedEngine()))


async def test_tokens_trigger_compaction_and_tool_pairs_survive() -> None:
    answers = gp.ScriptedEngine([Block.llm_text("they asked about tools")])
    turn = Turn()
    turn.append(Block.user("x" * 400))
    turn.append(Block.tool_call("c1", "f", {"q": "y" * 400}))
    turn.append(Block.tool_use("c1", "z" * 400))
    turn.append(Block.user("next"))
    seen: list[Turn] = []

    async def final(t: Turn) -> Turn:
        seen.append(t)
        return t

    handler = compaction(summarize_with(answers), max_tokens=200, keep_last=1)(final)
    out = await handler(turn)
    assert [b.kind for b in out.blocks] == [BlockKind.USER, BlockKind.USER]
    assert out.blocks[0].text == f"{SUMMARY_HEADER}\nthey asked about tools" and out.blocks[1].text == "next"
    transcript = answers.turns[0].blocks[1].text
    assert "assistant called f(" in transcript and json.dumps({"q": "y" * 400}) in transcript
    assert PAYLOAD_ID not in out.blocks[0].payload


async def test_validation_reads_each_link_once_and_a_drifted_server_makes_the_next_request_whole(
    geppetto_sim: Simulator,
) -> None:
    sim = geppetto_sim
    metrics = ResponsesMetrics()
    eng = engine(sim, mode="chained", metrics=metrics, validate_every=1)
    turn = Turn()
    turn.append(Block.system("be brief"))
    reads = []
    for i in range(4):
        turn.append(Block.user(f"q{i}"))
        sim.queue(Reply(text=f"a{i}"))
        turn = await eng.run_inference(turn)
        reads.append(sum(1 for r in sim.requests if r.method == "GET"))
    assert metrics.counters["validation:match"] == 4 and metrics.counters["validation:mismatch"] == 0
    # each validation reads only the link the request added: the response and its input items
    assert [b - a for a, b in zip([0, *reads], reads, strict=False)] == [2, 2, 2, 2]

    last = turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]
    settle(sim, last)
    sim.state.responses[last].output[0]["content"][0]["text"] = "something else"  # the server's copy drifted
    result = await eng.validate(turn)
    assert result.matches is False and "differs from the Turn" in result.detail and "something else" in result.detail
    assert metrics.counters["validation:mismatch"] == 1
    turn.append(Block.user("q4"))
    sim.queue(Reply(text="a4"))
    sent = len(sim.requests)
    turn = await eng.run_inference(turn)
    post = [r for r in sim.requests[sent:] if r.path == "/v1/responses"]
    assert len(post) == 1 and "previous_response_id" not in post[0].body  # a new chain, accepted
    assert metrics.counters["fallback:not_anchorable"] == 1
    assert_valid_requests(sim)


async def test_validation_in_conversation_mode(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    metrics = ResponsesMetrics()
    eng = engine(sim, mode="conversation", metrics=metrics)
    turn = Turn()
    turn.append(Block.user("q0"))
    for i in range(3):
        sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": f"c{i}"})]), Reply(text=f"a{i}"))
        turn = await eng.run_inference(turn)
        turn.append(Block.tool_use(turn.blocks[-1].payload[PAYLOAD_ID], f"r{i}"))
        turn = await eng.run_inference(turn)
        turn.append(Block.user(f"q{i + 1}"))
    assert (await eng.validate(turn)).matches is True
    conversation = next(iter(sim.state.conversations.values()))
    del conversation.items[1]  # the server lost an item
    result = await eng.validate(turn)
    assert result.matches is False and metrics.counters["validation:mismatch"] == 1
    sim.queue(Reply(text="fine"))
    before = len(sim.state.conversations)
    turn = await eng.run_inference(turn)
    assert len(sim.state.conversations) == before + 1  # the Turn went into a new conversation
    rid, wire = wire_before_last_response(turn)
    assert normalize(sim.context_items(rid)) == wire


async def test_nothing_to_validate_without_server_state(geppetto_sim: Simulator) -> None:
    eng = engine(geppetto_sim, mode="stateless")
    turn = Turn()
    turn.append(Block.user("hi"))
    assert (await eng.validate(turn)).matches is None
    with pytest.raises(gp.ConfigurationError, match="validate_every"):
        engine(geppetto_sim, validate_every=0)
