"""``ClaudeEngine(..., cache_diagnostics=True)`` against the simulator, which keeps a fingerprint of every
request that asks and answers ``diagnostics`` from it: a normal session agrees at every step, a change
geppetto makes itself is named by both sides, and a difference planted on the server's side is reported,
logged and counted as a disagreement (``geppetto_prefix_disagreements_total``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from conformance_support import check_sent
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from geppetto import Session
from geppetto.events import EventLog, with_sinks
from geppetto.observability import instrument
from geppetto.providers._disagreements import CACHE_DIAGNOSTICS, disagreement_metrics
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.tools import ToolRegistry
from geppetto.turns import BLOCK_META_RESPONSE_ID, Block, BlockKind, Turn
from geppetto.web._report import turn_report
from sim_engines import engine


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C in {city}"


def _verdicts(turn: Turn) -> list[dict[str, Any]]:
    """The diagnostics record of each answer (its last block), in order."""
    out = []
    for i, block in enumerate(turn.blocks):
        last = i + 1 == len(turn.blocks) or BLOCK_META_RESPONSE_ID.get(turn.blocks[i + 1].metadata) != (
            BLOCK_META_RESPONSE_ID.get(block.metadata)
        )
        record = CACHE_DIAGNOSTICS.get(block.metadata)
        if record is not None and last:
            out.append(record)
    return out


def _asked(sim: Simulator) -> list[Any]:
    bodies = [r.body for r in sim.requests if r.path == "/v1/messages"]
    for body in bodies:
        check_sent("/v1/messages", {**body, "stream": True})  # the SDK's request type has diagnostics
    return [b["diagnostics"]["previous_message_id"] for b in bodies]


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    disagreement_metrics.reset()


@pytest.mark.parametrize("stream", [True, False])
async def test_a_normal_session_with_a_tool_loop_reports_no_disagreement(geppetto_sim: Simulator, stream: bool) -> None:
    geppetto_sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Paris"})]), Reply(text="18C."))
    # cache marks move from request to request and thinking is replayed: neither is a change
    options: dict[str, Any] = {"prompt_cache": True, "thinking_budget": 1024}
    async with engine(geppetto_sim, "anthropic", cache_diagnostics=True, stream=stream, **options) as eng:
        session = Session(eng, tools=ToolRegistry([get_weather]))
        await session.run("Weather in Paris?")
        turn = await session.run("Thanks")
    assert any("cache_control" in str(r.body) for r in geppetto_sim.requests)
    ids = [BLOCK_META_RESPONSE_ID.get(b.metadata) for b in turn.blocks if b.kind is not BlockKind.USER]
    answers = list(dict.fromkeys(i for i in ids if i))
    assert _asked(geppetto_sim) == [None, *answers[:-1]]  # each request names the answer before it
    verdicts = _verdicts(turn)
    assert [v["verdict"] for v in verdicts] == ["agree"] * 3
    assert all(v["reported"] is None and v["expected"] == [] for v in verdicts)
    assert disagreement_metrics.snapshot() == {}


async def test_a_system_prompt_geppetto_changed_is_named_by_both_sides(geppetto_sim: Simulator) -> None:
    async with engine(geppetto_sim, "anthropic", cache_diagnostics=True) as eng:
        turn = await eng.run_inference(Turn(blocks=[Block.system("Be brief."), Block.user("one")]))
        turn.blocks[0].payload["text"] = "Be very brief."
        turn.append(Block.user("two"))
        turn = await eng.run_inference(turn)
    second = _verdicts(turn)[-1]
    assert second["reported"]["cache_miss_reason"]["type"] == "system_changed"
    assert second["expected"] == ["system"] and second["verdict"] == "agree"
    assert disagreement_metrics.snapshot() == {}


async def test_a_difference_planted_on_the_server_is_a_disagreement(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    reader = InMemoryMetricReader()
    inst = instrument(meter_provider=MeterProvider(metric_readers=[reader]))
    events: list[Any] = []
    try:
        async with engine(geppetto_sim, "anthropic", cache_diagnostics=True) as eng:
            session = Session(eng)
            first = await session.run("one")
            geppetto_sim.plant_divergence(str(BLOCK_META_RESPONSE_ID.get(first.blocks[-1].metadata)), "tools")
            with caplog.at_level(logging.WARNING, "geppetto.providers.disagreements"), with_sinks(events.append):
                turn = await session.run("two")
        data = reader.get_metrics_data()
    finally:
        inst.uninstrument()
    planted = _verdicts(turn)[-1]
    assert planted["reported"]["cache_miss_reason"]["type"] == "tools_changed"
    assert planted["expected"] == [] and planted["verdict"] == "disagree"
    assert disagreement_metrics.snapshot() == {"anthropic": 1}
    assert any("tools changed first" in r.getMessage() for r in caplog.records)
    assert [e.message for e in events if isinstance(e, EventLog) and "cache diagnostics" in e.message]
    points = [
        p
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "geppetto.prefix.disagreements"
        for p in m.data.data_points
    ]
    assert [(p.attributes, p.value) for p in points] == [({"provider": "anthropic"}, 1)]
    rows = turn_report(turn)["blocks"]  # the inspector shows it on the answer's blocks
    assert [r["cache_diagnostics"]["verdict"] for r in rows if r.get("cache_diagnostics")] == ["agree", "disagree"]


async def test_the_prometheus_counter_is_exported() -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    before = prometheus_client.REGISTRY.get_sample_value(
        "geppetto_prefix_disagreements_total", {"provider": "anthropic"}
    )
    disagreement_metrics.count("anthropic")
    after = prometheus_client.REGISTRY.get_sample_value(
        "geppetto_prefix_disagreements_total", {"provider": "anthropic"}
    )
    assert after == (before or 0) + 1


async def test_an_answer_the_server_has_no_fingerprint_of_is_inconclusive(geppetto_sim: Simulator) -> None:
    async with (
        engine(geppetto_sim, "anthropic") as plain,
        engine(geppetto_sim, "anthropic", cache_diagnostics=True) as eng,
    ):
        turn = await eng.run_inference(Turn(blocks=[Block.user("one")]))
        geppetto_sim.state.fingerprints.clear()  # the server's record expired
        turn.append(Block.user("two"))
        turn = await eng.run_inference(turn)
        turn.append(Block.user("three"))
        turn = await plain.run_inference(turn)  # without diagnostics: nothing asked, nothing kept
    records = [CACHE_DIAGNOSTICS.get(b.metadata) for b in turn.blocks if b.kind is BlockKind.LLM_TEXT]
    assert records[1]["reported"]["cache_miss_reason"]["type"] == "previous_message_not_found"  # type: ignore[index]
    assert records[1]["verdict"] == "inconclusive"  # type: ignore[index]
    assert records[2] is None
    assert "diagnostics" not in geppetto_sim.requests[-1].body
    assert disagreement_metrics.snapshot() == {}


async def test_the_simulator_says_unavailable_when_only_thinking_changed(geppetto_sim: Simulator) -> None:
    async with engine(geppetto_sim, "anthropic", cache_diagnostics=True) as eng:
        turn = await eng.run_inference(Turn(blocks=[Block.user("one")]))
    async with engine(geppetto_sim, "anthropic", cache_diagnostics=True, thinking_budget=1024) as eng:
        turn.append(Block.user("two"))
        turn = await eng.run_inference(turn)
    last = [CACHE_DIAGNOSTICS.get(b.metadata) for b in turn.blocks if b.kind is BlockKind.LLM_TEXT][-1]
    assert last["reported"] == {"cache_miss_reason": {"type": "unavailable"}}  # type: ignore[index]
    assert last["verdict"] == "inconclusive"  # type: ignore[index]


async def test_an_earlier_message_geppetto_edited_is_named_by_both_sides(geppetto_sim: Simulator) -> None:
    async with engine(geppetto_sim, "anthropic", cache_diagnostics=True) as eng:
        turn = await eng.run_inference(Turn(blocks=[Block.user("Weather in Paris?")]))
        turn.blocks[0].payload["text"] = "Weather in Nice?"  # a redactor's edit of history
        turn.append(Block.user("And tomorrow?"))
        turn = await eng.run_inference(turn)
    second = _verdicts(turn)[-1]
    assert second["reported"]["cache_miss_reason"]["type"] == "messages_changed"
    assert (second["expected"], second["verdict"]) == (["messages"], "agree")
