"""The cost of each request as an OpenTelemetry counter and span attribute."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK is not installed (the dev extra installs it)")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import geppetto as gp
from geppetto.observability import instrument
from geppetto.pricing import Rates, StaticPrices
from geppetto.simulator import Simulator


def _points(reader: InMemoryMetricReader, name: str) -> list[object]:
    data = reader.get_metrics_data()
    return [
        p
        for rm in (data.resource_metrics if data else [])
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == name
        for p in m.data.data_points
    ]


async def test_cost_is_a_counter_and_a_span_attribute_and_unpriced_requests_are_counted(
    geppetto_sim: Simulator,
) -> None:
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(spans))
    inst = instrument(tracer, MeterProvider(metric_readers=[reader]))
    try:
        prices = StaticPrices({"sim-1": Rates(input=1.0, output=4.0)})
        async with geppetto_sim.engine("anthropic") as engine:
            session = gp.Session(engine, prices=prices)
            await session.run("Hello there")
            await gp.Session(engine, prices=StaticPrices({})).run("Hello again")
    finally:
        inst.uninstrument()
    (cost,) = _points(reader, "geppetto.client.cost")
    assert cost.value == pytest.approx(session.usage.cost)  # type: ignore[attr-defined]
    (unpriced,) = _points(reader, "geppetto.client.unpriced_requests")
    assert unpriced.value == 1  # type: ignore[attr-defined]
    chats = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    assert [s.attributes.get("geppetto.usage.cost") for s in chats] == [pytest.approx(session.usage.cost), None]
