"""The Responses engine's metrics (defined once in ``providers._stateful``) and the prefix disagreement
counter (``providers._disagreements``) as OpenTelemetry instruments, one exporter per meter."""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.metrics import Observation

__all__ = ["disagreements_exporter", "responses_exporter"]


def responses_exporter(meter: Any) -> _OtelResponsesExporter:
    """The exporter of ``meter``: one per meter for the life of the process, since a meter keeps the first
    callback of an observable counter, so instrumenting again must count on in the same totals."""
    found = _RESPONSES_EXPORTERS.get(meter)
    if found is None:
        found = _RESPONSES_EXPORTERS[meter] = _OtelResponsesExporter(meter)
    return found


class _OtelCounters:
    """The counters of a metric table as observable counters, counted here under one lock and read by the SDK
    when it collects. On its own it exports ``providers._disagreements.DISAGREEMENT_METRICS``, named with dots
    (``geppetto_prefix_disagreements`` -> ``geppetto.prefix.disagreements``); the Responses exporter below
    instruments its table its own way and counts through the same readers."""

    def __init__(self, meter: Any, table: dict[str, tuple[str, str, str, str]]) -> None:
        self._counts: dict[str, Counter[tuple[tuple[str, str], ...]]] = {}
        self._lock = threading.Lock()
        self._instrument(meter, table)

    def _instrument(self, meter: Any, table: dict[str, tuple[str, str, str, str]]) -> None:
        for key, (name, description, kind, _label) in table.items():
            if kind == "counter":
                self._counts[key] = Counter()
                otel_name = name.replace("geppetto_prefix_", "geppetto.prefix.")
                meter.create_observable_counter(otel_name, callbacks=[self._reader(key)], description=description)

    def _reader(self, key: str) -> Callable[[Any], Iterable[Observation]]:
        def read(options: Any) -> Iterable[Observation]:
            with self._lock:
                totals = list(self._counts[key].items())
            return [Observation(value, dict(labels)) for labels, value in totals]

        return read

    def count(self, key: str, labels: dict[str, str]) -> None:
        with self._lock:
            self._counts[key][tuple(labels.items())] += 1


class _OtelResponsesExporter(_OtelCounters):
    """The Responses engine's metrics (defined once in ``providers._stateful``) as OpenTelemetry instruments.

    Counters are observable counters: a request adds one to a count kept here, and the SDK reads the
    totals when it collects, so a request costs no SDK call for them. Histograms are recorded as they come.
    """

    def __init__(self, meter: Any) -> None:
        from ..providers.openai_responses import METRICS

        self.histograms: dict[str, Any] = {}
        super().__init__(meter, METRICS)

    def _instrument(self, meter: Any, table: dict[str, tuple[str, str, str, str]]) -> None:
        for key, (name, description, kind, _label) in table.items():
            if key == "anchor":  # a timing of geppetto's own, for its benchmarks: Prometheus only
                continue
            otel_name = name.replace("geppetto_responses_", "geppetto.responses.").replace(
                "geppetto_requests_", "geppetto.requests."
            )
            if kind == "counter":
                self._counts[key] = Counter()
                meter.create_observable_counter(otel_name, callbacks=[self._reader(key)], description=description)
            elif kind == "gauge":
                meter.create_observable_gauge(otel_name, callbacks=[_gauge_reader(key)], description=description)
            else:
                self.histograms[key] = meter.create_histogram(otel_name, description=description)

    def observe(self, key: str, value: float) -> None:
        instrument = self.histograms.get(key)
        if instrument is not None:
            instrument.record(value)


def _gauge_reader(key: str) -> Callable[[Any], Iterable[Observation]]:
    from ..providers.openai_responses import GAUGES

    read_value = GAUGES[key]

    def read(options: Any) -> Iterable[Observation]:
        return [Observation(read_value())]

    return read


_RESPONSES_EXPORTERS: weakref.WeakKeyDictionary[Any, _OtelResponsesExporter] = weakref.WeakKeyDictionary()


def disagreements_exporter(meter: Any) -> _OtelCounters:
    """The prefix-disagreement counter's exporter of ``meter`` (one per meter, as :func:`responses_exporter`)."""
    found = _DISAGREEMENT_EXPORTERS.get(meter)
    if found is None:
        from ..providers import DISAGREEMENT_METRICS

        found = _DISAGREEMENT_EXPORTERS[meter] = _OtelCounters(meter, DISAGREEMENT_METRICS)
    return found


_DISAGREEMENT_EXPORTERS: weakref.WeakKeyDictionary[Any, _OtelCounters] = weakref.WeakKeyDictionary()
