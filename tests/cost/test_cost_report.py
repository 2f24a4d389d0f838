"""The inspector's and dashboard's cost figures: per request (tokens, cached share, cost, uncached cost) and
over sessions (priced cost plus a count of the unpriced, never a zero for them)."""

from __future__ import annotations

import pytest

import geppetto as gp
from geppetto.events import Event, with_sinks
from geppetto.pricing import Rates, StaticPrices
from geppetto.session import MemoryTurnStore
from geppetto.session._totals import add_totals
from geppetto.simulator import Simulator
from geppetto.web import dashboard, session_report

PRICES = StaticPrices({"sim-1": Rates(input=2.0, output=8.0, cached_input=0.2, cache_write=2.5)})
LONG = " ".join(f"rule{i} applies." for i in range(700))


async def test_each_request_shows_its_cost_and_what_it_would_cost_uncached(geppetto_sim: Simulator) -> None:
    store = MemoryTurnStore()
    async with geppetto_sim.engine("anthropic") as engine:
        session = gp.Session(engine, store=store, prices=PRICES, record_events=True)
        session.append(gp.Turn([gp.Block.system(LONG)]))
        await session.run("hello")
        await session.run("again")
    snapshots = await store.load_session(session.session_id)
    events = await store.load_events(session.session_id)
    report = session_report(snapshots, events, session_id=session.session_id)
    first, second = report["requests"]
    assert first["usage"]["cache_write_tokens"] > 0 and second["usage"]["cached_tokens"] > 0
    assert second["cost"] < second["uncached_cost"]  # the read was billed at the cached rate
    assert first["cost"] > first["uncached_cost"]  # the write at more than the input rate
    totals = report["totals"]
    assert totals["cost"] == pytest.approx(session.usage.cost)
    assert totals["cached_tokens"] == session.usage.cached_tokens and totals["unpriced_requests"] == 0
    # a turn file alone (no event log) still shows the cost the engine stamped on each response
    inferred = session_report([session.latest], [])["requests"]  # type: ignore[list-item]
    assert [q["cost"] for q in inferred] == pytest.approx([first["cost"], second["cost"]])


async def test_dashboard_adds_priced_cost_and_counts_unpriced_requests(geppetto_sim: Simulator) -> None:
    events: list[Event] = []
    async with geppetto_sim.engine("anthropic") as engine:
        with with_sinks(events.append):
            await gp.Session(engine, prices=PRICES).run("priced")
            await gp.Session(engine, prices=StaticPrices({})).run("unpriced")
    finals = [e for e in events if e.type == "final"]
    priced, unpriced = (finals[0].metadata.cost or {}).get("total"), finals[1].metadata.cost
    assert priced and unpriced is None

    class Logged:
        def __init__(self, event: Event) -> None:
            self.type, self.event, self.inference_id = event.type, event.to_dict(), "i"

    one = {"session_id": "a", "totals": session_report([], [Logged(finals[0])])["totals"]}
    two = {"session_id": "b", "totals": session_report([], [Logged(finals[1])])["totals"]}
    d = dashboard([one, two])
    assert d["cost"] == pytest.approx(priced) and d["unpriced_requests"] == 1 and d["requests"] == 2
    old = {k: v for k, v in one["totals"].items() if k not in ("cost", "uncached_cost", "unpriced_requests")}
    assert add_totals(old, two["totals"])["unpriced_requests"] == 1  # a summary kept before these keys existed
