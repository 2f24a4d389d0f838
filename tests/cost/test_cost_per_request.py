"""What pricing and counting a request costs: each (provider, model) is looked up in genai-prices once, known
or not, so a response is priced in O(1) whatever the table's size; the figures recorded are the same as a
fresh lookup gives."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

import geppetto as gp
from geppetto.events import EventMetadata, Usage
from geppetto.pricing import BLOCK_META_USAGE, TURN_META_COST, GenaiPrices, Rates, record_usage, use_prices
from geppetto.simulator import Reply, Simulator, ToolCall

genai_prices = pytest.importorskip("genai_prices")
from genai_prices import data_snapshot  # noqa: E402


class CountingSnapshot:
    """genai-prices' snapshot, counting the lookups it is asked for."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lookups: list[str] = []

    def find_provider_model(self, model: str, *args: Any) -> Any:
        self.lookups.append(model)
        return self.inner.find_provider_model(model, *args)


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> CountingSnapshot:
    snap = CountingSnapshot(data_snapshot.get_snapshot())
    monkeypatch.setattr(data_snapshot, "_custom_snapshot", snap)
    return snap


def test_an_unknown_model_is_looked_up_once(counting: CountingSnapshot) -> None:
    table = GenaiPrices()
    for _ in range(5):
        assert table.rates("openai", "sim-1", Usage(input_tokens=10)) is None
    assert counting.lookups == ["sim-1"]


def test_a_known_model_is_looked_up_once_and_priced_as_a_fresh_lookup(counting: CountingSnapshot) -> None:
    table = GenaiPrices()
    usage = Usage(input_tokens=1200, output_tokens=30, cached_tokens=1000)
    first = table.rates("openai", "gpt-4.1-mini", usage)
    again = [table.rates("openai", "gpt-4.1-mini", usage) for _ in range(4)]
    assert counting.lookups == ["gpt-4.1-mini"]
    assert first is not None and all(r == first for r in again)
    _, info = data_snapshot.get_snapshot().inner.find_provider_model("gpt-4.1-mini", None, "openai", None)
    prices = info.get_prices(datetime.datetime.now(tz=datetime.UTC))
    assert first.input == float(prices.input_mtok) and first.output == float(prices.output_mtok)
    assert first.cached_input == float(prices.cache_read_mtok)


def test_the_same_model_of_another_provider_is_its_own_entry(counting: CountingSnapshot) -> None:
    table = GenaiPrices()
    table.rates("openai", "gpt-4.1-mini", Usage())
    table.rates("openai-chat", "gpt-4.1-mini", Usage())
    table.rates("openai", "gpt-4.1-mini", Usage())
    assert counting.lookups == ["gpt-4.1-mini", "gpt-4.1-mini"]


def test_a_tiered_model_still_pays_the_tier_each_prompt_reaches(counting: CountingSnapshot) -> None:
    table = GenaiPrices()
    small = table.rates("anthropic", "claude-sonnet-4-5", Usage(input_tokens=1_000))
    large = table.rates("anthropic", "claude-sonnet-4-5", Usage(input_tokens=250_000))
    again = table.rates("anthropic", "claude-sonnet-4-5", Usage(input_tokens=1_000))
    assert counting.lookups == ["claude-sonnet-4-5"]
    assert small is not None and large is not None and large.input > small.input and again == small


def test_a_new_snapshot_starts_the_lookups_again(counting: CountingSnapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    table = GenaiPrices()
    table.rates("openai", "sim-1", Usage())
    fresh = CountingSnapshot(counting.inner)
    monkeypatch.setattr(data_snapshot, "_custom_snapshot", fresh)  # what UpdatePrices does
    table.rates("openai", "sim-1", Usage())
    table.rates("openai", "sim-1", Usage())
    assert counting.lookups == ["sim-1"] and fresh.lookups == ["sim-1"]


def test_the_cache_is_bounded(counting: CountingSnapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    from geppetto.pricing import _genai

    monkeypatch.setattr(_genai, "_CACHED_MODELS", 3)
    table = GenaiPrices()
    for i in range(10):
        table.rates("openai", f"self-hosted-{i}", Usage())
    assert len(table._models) <= 3 and len(counting.lookups) == 10


def test_the_recorded_uncached_cost_is_the_cost_of_the_same_tokens_with_no_cache() -> None:
    rates = Rates(input=2.0, output=8.0, cached_input=0.5, cache_write=2.5, reasoning=10.0)
    usage = Usage(input_tokens=1200, output_tokens=50, cached_tokens=700, cache_write_tokens=300, reasoning_tokens=20)
    turn = gp.Turn([gp.Block.user("hi")])
    answer = gp.Block.llm_text("hello")
    meta = EventMetadata()
    with use_prices(gp.pricing.StaticPrices({"m": rates})):
        cost = record_usage(turn, [answer], meta, provider="openai", model="m", usage=usage)
    plain = Usage(input_tokens=1200, output_tokens=50, reasoning_tokens=20)
    recorded = TURN_META_COST.get(turn.metadata)
    assert cost is not None and recorded is not None
    assert recorded == {**cost.to_dict(), "uncached": rates.cost(plain).total}
    assert rates.uncached_total(usage) == rates.cost(plain).total
    stamp = BLOCK_META_USAGE.get(answer.metadata)
    assert stamp == {"usage": usage.to_dict(), "cost": recorded, "model": "m"}
    # each place holds its own copy: editing one leaves the others as they were
    assert stamp is not None
    stamp["usage"]["input_tokens"] = 0
    stamp["cost"]["total"] = 0.0
    assert gp.turns.TURN_META_USAGE.get(turn.metadata)["input_tokens"] == 1200  # type: ignore[index]
    assert TURN_META_COST.get(turn.metadata)["total"] == cost.total  # type: ignore[index]
    assert meta.cost is not None and meta.cost["total"] == cost.total


async def test_a_session_prices_an_unknown_and_a_known_model_from_one_lookup_each(
    geppetto_sim: Simulator, counting: CountingSnapshot
) -> None:
    def lookup(city: str) -> str:
        """Look a city up."""
        return f"facts about {city}"

    for model in ("sim-1", "gpt-4.1-mini"):
        geppetto_sim.reset()
        calls = [Reply(tool_calls=[ToolCall("lookup", {"city": f"c{i}"}, call_id=f"call_{i}")]) for i in range(4)]
        geppetto_sim.queue(*calls, Reply(text="done"))
        table = GenaiPrices()
        async with geppetto_sim.engine("openai-responses", model=model, mode="chained") as engine:
            session = gp.Session(engine, tools=[gp.tool(lookup)], prices=table)
            await session.run("look five cities up")
        usage = session.usage
        assert usage.requests == 5
        assert (usage.cost is None) == (model == "sim-1")
        assert counting.lookups.count(model) == 1, counting.lookups
