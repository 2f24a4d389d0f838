"""Cost and limits over a session against the simulator: every request priced from its usage, limits
checked before each request."""

from __future__ import annotations

from typing import Any

import pytest

import geppetto as gp
from geppetto.events import Event, EventFinal, with_sinks
from geppetto.pricing import BLOCK_META_USAGE, Rates, StaticPrices, price
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine
from geppetto.providers.openai_chat import ChatEngine
from geppetto.simulator import Reply, Simulator, ToolCall

PRICES = StaticPrices({"sim-1": Rates(input=2.0, output=8.0, cached_input=0.5, cache_write=2.5)})


def lookup(city: str) -> str:
    """Look a city up."""
    return f"facts about {city}"


def engines(sim: Simulator) -> dict[str, Any]:
    return {
        "responses": sim.engine("openai-responses", mode="chained"),
        "chat": ChatEngine("sim-1", "sk-test", sim.openai_url),
        "claude": ClaudeEngine("sim-1", "sk-ant-test", sim.url),
        "gemini": GeminiEngine("sim-1", "g-test", sim.url),
    }


def five_step_loop(sim: Simulator) -> None:
    """Four steps that each call a tool, then an answer: a five-request tool loop."""
    calls = [Reply(tool_calls=[ToolCall("lookup", {"city": f"c{i}"}, call_id=f"call_{i}")]) for i in range(4)]
    sim.queue(*calls, Reply(text="done"))


@pytest.mark.parametrize("name", ["responses", "chat", "claude", "gemini"])
async def test_cost_of_a_tool_loop_is_the_sum_of_its_requests_priced_from_usage(
    geppetto_sim: Simulator, name: str
) -> None:
    five_step_loop(geppetto_sim)
    events: list[Event] = []
    session = gp.Session(engines(geppetto_sim)[name], tools=[lookup], prices=PRICES)
    with with_sinks(events.append):
        out = await session.run("go")
    finals = [e for e in events if isinstance(e, EventFinal)]
    assert len(finals) == 5
    stamps = [s for b in out.blocks if (s := BLOCK_META_USAGE.get(b.metadata)) is not None]
    assert len(stamps) == 5
    expected = sum(e.metadata.cost["total"] for e in finals if e.metadata.cost)
    from_usage = sum(
        price(e.metadata.usage, e.metadata.provider, "sim-1", PRICES).total  # type: ignore[union-attr]
        for e in finals
    )
    usage = session.usage
    assert usage.requests == 5
    assert usage.tool_calls == 4
    assert usage.input_tokens == sum(e.metadata.usage.input_tokens for e in finals)  # type: ignore[union-attr]
    assert usage.cost == pytest.approx(expected) == pytest.approx(from_usage)
    assert usage.cost == pytest.approx(sum(s["cost"]["total"] for s in stamps))
    assert usage.cost > 0
    if name == "responses":  # chained: every request after the first sent only its delta, and was billed in full
        assert [e.metadata.extra["responses.full"] for e in finals] == [True, False, False, False, False]


async def test_max_requests_raises_before_the_fourth_request_with_three_steps_kept(geppetto_sim: Simulator) -> None:
    five_step_loop(geppetto_sim)
    session = gp.Session(
        ClaudeEngine("sim-1", "sk-ant-test", geppetto_sim.url), tools=[lookup], limits=gp.UsageLimits(max_requests=3)
    )
    with pytest.raises(gp.UsageLimitExceeded, match="max_requests=3") as caught:
        await session.run("go")
    err = caught.value
    assert err.limit == "max_requests" and err.value == 3 and err.maximum == 3
    assert len([r for r in geppetto_sim.requests if r.path == "/v1/messages"]) == 3
    kinds = [b.kind for b in err.turn.blocks]
    assert kinds.count(gp.BlockKind.TOOL_CALL) == 3 and kinds.count(gp.BlockKind.TOOL_USE) == 3
    assert session.usage.requests == 3 and not session.running
    # the session stays usable: raise the limit and go on
    session.limits = None
    out = await session.run("again")  # the two replies left: one more tool call, then the answer
    assert out.blocks[-1].text == "done"
    assert session.usage.requests == 5


LONG = " ".join(f"rule{i} applies." for i in range(700))  # ~2,100 tokens: long enough to be cached


COUNT_PATHS = {
    "claude": "/v1/messages/count_tokens",
    "gemini": "/v1beta/models/sim-1:countTokens",
    "responses": "/v1/responses/input_tokens",
}


@pytest.mark.parametrize("name", list(COUNT_PATHS))
async def test_max_input_tokens_raises_before_sending_from_the_counted_prefix(
    geppetto_sim: Simulator, name: str
) -> None:
    engine = engines(geppetto_sim)[name]
    session = gp.Session(engine, limits=gp.UsageLimits(max_input_tokens=500))
    session.append(gp.Turn([gp.Block.system(LONG)]))
    with pytest.raises(gp.UsageLimitExceeded, match="max_input_tokens=500") as caught:
        await session.run("hello")
    paths = [r.path for r in geppetto_sim.requests]
    assert paths == [COUNT_PATHS[name]]  # counted, never sent
    counted = await engine.count_tokens(caught.value.turn)
    assert caught.value.value == counted > 500
    assert "counted by the provider" in str(caught.value)
    assert session.usage.requests == 0


async def test_an_unpriced_model_with_max_cost_raises_before_any_request(geppetto_sim: Simulator) -> None:
    engine = ClaudeEngine("sim-unknown-model", "sk-ant-test", geppetto_sim.url)
    session = gp.Session(engine, limits=gp.UsageLimits(max_cost=1.0), prices=PRICES)
    with pytest.raises(gp.UsageLimitExceeded, match=r"max_cost=1 cannot be enforced.*allow_unpriced=True"):
        await session.run("hello")
    assert geppetto_sim.requests == []
    # allowed explicitly: the request runs, and the session's cost says it is unknown
    session.limits = gp.UsageLimits(max_cost=1.0, allow_unpriced=True)
    await session.run("hello")
    assert session.usage.requests == 1 and session.usage.unpriced_requests == 1
    assert session.usage.cost is None


async def test_max_cost_stops_the_session_once_spent(geppetto_sim: Simulator) -> None:
    five_step_loop(geppetto_sim)
    session = gp.Session(
        ClaudeEngine("sim-1", "sk-ant-test", geppetto_sim.url),
        tools=[lookup],
        prices=PRICES,
        limits=gp.UsageLimits(max_cost=1e-9),
    )
    with pytest.raises(gp.UsageLimitExceeded, match="max_cost") as caught:
        await session.run("go")
    assert session.usage.requests == 1
    assert caught.value.value == pytest.approx(session.usage.cost)


async def test_claude_requests_carry_cache_breakpoints_and_the_second_reads_the_cache(geppetto_sim: Simulator) -> None:
    session = gp.Session(ClaudeEngine("sim-1", "sk-ant-test", geppetto_sim.url), prices=PRICES)
    session.append(gp.Turn([gp.Block.system(LONG)]))
    first = await session.run("hello")
    second = await session.run("and again")
    bodies = [r.body for r in geppetto_sim.requests if r.path == "/v1/messages"]
    assert len(bodies) == 2
    for body in bodies:
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        marks = sum("cache_control" in b for m in body["messages"] for b in m["content"]) + len(body["system"])
        assert marks <= 4
    one, two = (gp.events.Usage.from_dict(t.metadata["geppetto.usage@v1"]) for t in (first, second))
    assert one.cache_write_tokens > 0 and one.cached_tokens == 0
    assert two.cached_tokens >= one.cache_write_tokens
    assert session.usage.cached_tokens == two.cached_tokens
    # the read is billed at the cached rate: cheaper than the same tokens uncached
    cost = price(two, "anthropic", "sim-1", PRICES)
    assert cost is not None and cost.cached_input == pytest.approx(two.cached_tokens * 0.5 / 1e6)


async def test_prompt_cache_off_sends_no_breakpoints(geppetto_sim: Simulator) -> None:
    session = gp.Session(ClaudeEngine("sim-1", "sk-ant-test", geppetto_sim.url, prompt_cache=False))
    session.append(gp.Turn([gp.Block.system(LONG)]))
    await session.run("hello")
    body = next(r.body for r in geppetto_sim.requests if r.path == "/v1/messages")
    assert "cache_control" not in str(body)


def test_prompt_cache_refuses_an_unknown_mode() -> None:
    with pytest.raises(gp.ConfigurationError, match="prompt_cache='always'"):
        ClaudeEngine("sim-1", "k", prompt_cache="always")


async def test_gemini_reports_implicit_cache_reads_and_counts_tokens(geppetto_sim: Simulator) -> None:
    engine = GeminiEngine("sim-1", "g-test", geppetto_sim.url)
    session = gp.Session(engine, prices=PRICES)
    session.append(gp.Turn([gp.Block.system(LONG)]))
    await session.run("hello")
    assert session.usage.cached_tokens == 0
    seed = session.prompt("again")
    counted = await engine.count_tokens(seed)
    out = await session.start_inference().wait()
    usage = gp.events.Usage.from_dict(out.metadata["geppetto.usage@v1"])
    assert usage.input_tokens == counted
    assert usage.cached_tokens > 1000


async def test_chat_engine_count_is_an_estimate(geppetto_sim: Simulator) -> None:
    engine = ChatEngine("sim-1", "sk-test", geppetto_sim.openai_url)
    session = gp.Session(engine, limits=gp.UsageLimits(max_total_tokens=100))
    session.append(gp.Turn([gp.Block.system(LONG)]))
    with pytest.raises(gp.UsageLimitExceeded, match=r"max_total_tokens=100.*\(estimated\)"):
        await session.run("hello")
    assert engine.count_is_estimate and geppetto_sim.requests == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"max_requests": -1}, "max_requests=-1"), ({"max_cost": "1"}, "max_cost='1'"), ({"per": "day"}, "per='day'")],
)
def test_usage_limits_refuse_bad_values(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(gp.UsageError, match=message):
        gp.UsageLimits(**kwargs)


def test_session_refuses_limits_of_the_wrong_type() -> None:
    with pytest.raises(gp.UsageError, match=r"limits= takes a geppetto\.UsageLimits"):
        gp.Session(gp.ScriptedEngine([]), limits={"max_requests": 1})  # type: ignore[arg-type]


async def test_max_tool_calls_raises_before_the_calls_run(geppetto_sim: Simulator) -> None:
    five_step_loop(geppetto_sim)
    ran: list[str] = []

    def lookup(city: str) -> str:
        """Look a city up."""
        ran.append(city)
        return city

    engine = ChatEngine("sim-1", "sk-test", geppetto_sim.openai_url)
    session = gp.Session(engine, tools=[lookup], limits=gp.UsageLimits(max_tool_calls=2))
    with pytest.raises(gp.UsageLimitExceeded, match="max_tool_calls=2") as caught:
        await session.run("go")
    assert ran == ["c0", "c1"]  # the third call was asked for, not run
    assert caught.value.turn.blocks[-1].kind is gp.BlockKind.TOOL_CALL


async def test_per_inference_limits_count_each_run_anew_and_session_limits_do_not(geppetto_sim: Simulator) -> None:
    engine = ClaudeEngine("sim-1", "sk-ant-test", geppetto_sim.url)
    session = gp.Session(engine, limits=gp.UsageLimits(max_requests=1, per="inference"))
    await session.run("one")
    await session.run("two")
    assert session.usage.requests == 2
    session.limits = gp.UsageLimits(max_requests=2)
    with pytest.raises(gp.UsageLimitExceeded, match="in this session"):
        await session.run("three")


async def test_a_restored_session_keeps_its_stored_totals(geppetto_sim: Simulator) -> None:
    from geppetto.session import MemoryTurnStore

    store = MemoryTurnStore()
    engine = ClaudeEngine("sim-1", "sk-ant-test", geppetto_sim.url)
    first = gp.Session(engine, store=store, prices=PRICES)
    await first.run("hello")
    await first.run("again")
    restored = await gp.Session.restore(engine, store, first.session_id, prices=PRICES)
    assert restored.usage == first.usage and restored.usage.requests == 2
    restored.limits = gp.UsageLimits(max_requests=2)
    with pytest.raises(gp.UsageLimitExceeded, match="max_requests=2"):
        await restored.run("third")


def test_usage_limits_parse_the_command_line_form() -> None:
    limits = gp.UsageLimits.parse("max_requests=20, max_cost=1.5,allow_unpriced=true,per=inference")
    assert limits == gp.UsageLimits(max_requests=20, max_cost=1.5, allow_unpriced=True, per="inference")
    with pytest.raises(gp.UsageError, match="write NAME=VALUE"):
        gp.UsageLimits.parse("max_requests")
    with pytest.raises(gp.UsageError, match="give a number"):
        gp.UsageLimits.parse("max_requests=many")


def test_unpriced_is_none_never_zero() -> None:
    usage = gp.events.Usage(input_tokens=10, output_tokens=5)
    assert price(usage, "anthropic", "no-such-model", PRICES) is None
    assert price(None, "anthropic", "sim-1", PRICES) is None
    totals = gp.SessionUsage()
    totals.add(usage, 0.25)
    totals.add(usage, None)
    assert totals.cost is None and totals.priced_cost == 0.25 and totals.unpriced_requests == 1


def test_rates_split_cached_written_and_reasoning_tokens() -> None:
    usage = gp.events.Usage(
        input_tokens=1000, cached_tokens=600, cache_write_tokens=100, output_tokens=50, reasoning_tokens=20
    )
    cost = Rates(input=2.0, output=8.0, cached_input=0.5, cache_write=2.5, reasoning=10.0).cost(usage)
    assert cost.input == pytest.approx(300 * 2.0 / 1e6)
    assert cost.cached_input == pytest.approx(600 * 0.5 / 1e6)
    assert cost.cache_write == pytest.approx(100 * 2.5 / 1e6)
    assert cost.output == pytest.approx(30 * 8.0 / 1e6)
    assert cost.reasoning == pytest.approx(20 * 10.0 / 1e6)
    assert cost.total == pytest.approx(
        sum(cost.to_dict()[k] for k in ("input", "cached_input", "cache_write", "output", "reasoning"))
    )


def test_genai_prices_agree_with_its_own_total() -> None:
    genai_prices = pytest.importorskip("genai_prices")
    from geppetto.pricing import GenaiPrices

    usage = gp.events.Usage(input_tokens=250_000, cached_tokens=1000, cache_write_tokens=500, output_tokens=300)
    mine = price(usage, "anthropic", "claude-sonnet-4-5", GenaiPrices())
    theirs = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=250_000, cache_read_tokens=1000, cache_write_tokens=500, output_tokens=300),
        "claude-sonnet-4-5",
        provider_id="anthropic",
    )
    assert mine is not None and mine.total == pytest.approx(float(theirs.total_price))
    assert GenaiPrices().rates("gemini", "no-such-model", usage) is None


@pytest.mark.parametrize("name", ["claude", "gemini"])
async def test_count_tokens_equals_the_input_the_request_then_reports(geppetto_sim: Simulator, name: str) -> None:
    engine = engines(geppetto_sim)[name]
    turn = gp.Turn([gp.Block.system("You are terse."), gp.Block.user("Tell me about Paris.")])
    counted = await engine.count_tokens(turn)
    out = await engine.run_inference(turn)
    assert not engine.count_is_estimate
    assert counted == gp.events.Usage.from_dict(out.metadata["geppetto.usage@v1"]).input_tokens > 0


async def test_a_stream_without_usage_is_unpriced_not_free(geppetto_sim: Simulator) -> None:
    engine = ChatEngine("sim-1", "sk-test", geppetto_sim.openai_url, stream_usage=False)
    events: list[Event] = []
    session = gp.Session(engine, prices=PRICES)
    with with_sinks(events.append):
        out = await session.run("hello")
    final = next(e for e in events if isinstance(e, EventFinal))
    assert final.metadata.usage is None and final.metadata.cost is None
    assert "geppetto.usage@v1" not in out.metadata and "geppetto.cost@v1" not in out.metadata
    assert session.usage.requests == 1 and session.usage.cost is None


@pytest.mark.parametrize("limit", ["max_requests", "max_tool_calls"])
async def test_a_limit_hit_mid_tool_loop_saves_the_work_and_holds_for_a_restored_session(limit: str) -> None:
    from geppetto.session import TURN_META_SESSION_USAGE, TURN_META_STOPPED_BY_LIMIT, MemoryTurnStore
    from geppetto.testing import ScriptedEngine

    ran: list[str] = []

    def lookup(city: str) -> str:
        """Look a city up."""
        ran.append(city)
        return city

    steps = [gp.Block.tool_call(f"c{i}", "lookup", {"city": f"c{i}"}) for i in range(3)]
    store = MemoryTurnStore()
    limits = gp.UsageLimits(max_requests=2) if limit == "max_requests" else gp.UsageLimits(max_tool_calls=1)
    session = gp.Session(ScriptedEngine(steps), tools=[lookup], store=store, limits=limits)
    with pytest.raises(gp.UsageLimitExceeded) as caught:
        await session.run("go")
    saved = await store.load_session(session.session_id)
    assert len(saved) == 1 and saved[0] == session.latest
    stopped = TURN_META_STOPPED_BY_LIMIT.get(saved[0].metadata)
    assert stopped is not None and stopped["limit"] == limit and stopped["message"] == str(caught.value)
    kinds = [b.kind for b in saved[0].blocks]
    if limit == "max_requests":  # two requests, two calls run; the third request was not sent
        assert ran == ["c0", "c1"] and TURN_META_SESSION_USAGE.get(saved[0].metadata)["requests"] == 2  # type: ignore[index]
        assert kinds[-1] is gp.BlockKind.TOOL_USE
    else:  # the second request asked for a call past the limit: it is answered as not run
        assert ran == ["c0"]
        assert saved[0].blocks[-1].payload["error"].startswith("not run: max_tool_calls=1 was reached")
        assert caught.value.turn.blocks[-1].kind is gp.BlockKind.TOOL_CALL, "error.turn is left as it was"
    engine = ScriptedEngine([gp.Block.llm_text("never sent")])
    restored = await gp.Session.restore(engine, store, session.session_id, tools=[lookup], limits=limits)
    with pytest.raises(gp.UsageLimitExceeded, match=limit):
        await restored.run("again")
    assert engine.turns == [], "refused before any request"
    assert len(await store.load_session(session.session_id)) == 1, "a refused prompt saves nothing"
