"""Counters of ``geppetto serve``'s failures, readable in-process and exported to Prometheus.

``server_metrics.snapshot()`` gives ``{"<key>:<label value>": count}``; with ``prometheus_client`` installed
the same counts go to its default registry (``GET /metrics`` serves them):

- ``geppetto_server_publish_failures_total{bus}``: publishes the event bus failed (each is tried again);
- ``geppetto_server_events_dropped_total{reason}``: events never published: ``outbox_full`` (the bus was
  down so long that the worker's outbox filled; readers get an ``events_missing`` event in their place) or
  ``shutdown`` (the worker stopped before the bus came back);
- ``geppetto_server_control_failures_total{bus}``: failures of the control topic a worker follows for
  cancels (it follows it again, with backoff);
- ``geppetto_server_inferences_failed_total{error}``: inferences that ended ``failed``, by exception type.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from typing import Any

from geppetto.providers._stateful import _prom, _PrometheusExporter

__all__ = ["SERVER_METRICS", "ServerMetrics", "server_metrics"]

SERVER_METRICS: dict[str, tuple[str, str, str, str]] = {
    "publish_failures": (
        "geppetto_server_publish_failures",
        "Event publishes the event bus failed (each is tried again)",
        "counter",
        "bus",
    ),
    "events_dropped": (
        "geppetto_server_events_dropped",
        "Events never published to the event bus, by reason",
        "counter",
        "reason",
    ),
    "control_failures": (
        "geppetto_server_control_failures",
        "Failures of the control topic subscription (cancels from other workers)",
        "counter",
        "bus",
    ),
    "inferences_failed": (
        "geppetto_server_inferences_failed",
        "Inferences that ended failed, by exception type",
        "counter",
        "error",
    ),
}
"""The one definition of the server's metrics: key -> (name, description, kind, label), as
:data:`geppetto.providers._stateful.METRICS`; every exporter builds its instruments from it."""


class ServerMetrics:
    """In-process counters of :data:`SERVER_METRICS`; thread-safe. ``registry``: a
    ``prometheus_client.CollectorRegistry`` to export to (default: its global one)."""

    def __init__(self, registry: Any = None) -> None:
        self.counters: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._exporters: tuple[Any, ...] = ()
        if _prom is not None:
            # A ValueError: already registered in that registry by another instance.
            with contextlib.suppress(ValueError):
                self._exporters = (_PrometheusExporter(registry, SERVER_METRICS),)

    def count(self, key: str, value: str, amount: int = 1) -> None:
        """Add ``amount`` to counter ``key`` (of :data:`SERVER_METRICS`) for the label value ``value``."""
        label = SERVER_METRICS[key][3]
        with self._lock:
            self.counters[f"{key}:{value}"] += amount
        for exporter in self._exporters:
            exporter.count(key, {label: value}, amount)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counters)


server_metrics = ServerMetrics()
"""The process-wide counters every server component records into."""
