"""Metrics: first requests are not fallbacks, fallback reasons are a fixed set of codes (bounded label
cardinality), delta and whole-Turn sizes are separate histograms; the Prometheus export matches."""

from __future__ import annotations

import pytest
from responses_support import engine

from geppetto.providers.openai_responses import FALLBACK_REASONS, ResponsesMetrics
from geppetto.simulator import Reply, Simulator
from geppetto.turns import Block, Turn

prometheus_client = pytest.importorskip("prometheus_client")


def _start() -> Turn:
    turn = Turn()
    turn.append(Block.system("be terse"))
    turn.append(Block.user("hi"))
    return turn


async def _three_requests(sim: Simulator, m: ResponsesMetrics, mode: str) -> None:
    """A first request, a delta request, then a fallback (middleware reorders the head)."""
    sim.queue(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    eng = engine(sim, mode=mode, metrics=m)
    turn = await eng.run_inference(_start())
    turn.append(Block.user("more"))
    turn = await eng.run_inference(turn)
    turn.blocks[0], turn.blocks[1] = turn.blocks[1], turn.blocks[0]
    turn.append(Block.user("again"))
    await eng.run_inference(turn)


async def test_chained_counters_and_histograms(geppetto_sim: Simulator) -> None:
    m = ResponsesMetrics(registry=prometheus_client.CollectorRegistry())
    await _three_requests(geppetto_sim, m, "chained")
    snap = m.snapshot()
    assert snap["counters"] == {"stateless": 2, "chained": 1, "fallback": 1, "fallback:fingerprint_mismatch": 1}
    assert (snap["delta_items"], snap["full_items"]) == ([1], [2, 6])
    assert len(snap["anchor_seconds"]) == 3


async def test_conversation_counters_and_histograms(geppetto_sim: Simulator) -> None:
    m = ResponsesMetrics(registry=prometheus_client.CollectorRegistry())
    await _three_requests(geppetto_sim, m, "conversation")
    snap = m.snapshot()
    assert snap["counters"] == {"conversation": 3, "fallback": 1, "fallback:fingerprint_mismatch": 1}
    assert (snap["delta_items"], snap["full_items"]) == ([1], [2, 6])  # a new conversation: its seed and input


async def test_prometheus_export(geppetto_sim: Simulator) -> None:
    registry = prometheus_client.CollectorRegistry()
    m = ResponsesMetrics(registry=registry)
    await _three_requests(geppetto_sim, m, "chained")
    value = registry.get_sample_value
    assert value("geppetto_responses_requests_total", {"mode": "stateless"}) == 2
    assert value("geppetto_responses_requests_total", {"mode": "chained"}) == 1
    assert value("geppetto_responses_fallbacks_total", {"reason": "fingerprint_mismatch"}) == 1
    assert (value("geppetto_responses_delta_items_count"), value("geppetto_responses_delta_items_sum")) == (1, 1)
    assert (value("geppetto_responses_full_items_count"), value("geppetto_responses_full_items_sum")) == (2, 8)
    assert value("geppetto_responses_anchor_seconds_count") == 3
    labels = {v for metric in registry.collect() for sample in metric.samples for v in sample.labels.values() if v}
    assert labels <= {"stateless", "chained", "conversation", *FALLBACK_REASONS} | {
        s.labels.get("le") for metric in registry.collect() for s in metric.samples if "le" in s.labels
    }


def test_fallback_reasons_outside_the_set_count_as_other() -> None:
    m = ResponsesMetrics(registry=prometheus_client.CollectorRegistry())
    m.fallback("conversation conv_123 no longer matches")
    m.fallback("empty_delta")
    assert m.snapshot()["counters"] == {"fallback": 2, "fallback:other": 1, "fallback:empty_delta": 1}
