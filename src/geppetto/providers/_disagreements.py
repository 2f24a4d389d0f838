"""Provider-confirmed prefixes: a provider's own account of what changed, checked against geppetto's.

geppetto proves a request's prefix before sending it (the anchor proof, the prefix guard). Some providers
can say afterwards, from their side, where a request first diverged from an earlier one (Claude's
``diagnostics.previous_message_id``: model, system, tools or messages). An engine asked for such
diagnostics keeps the answer on the response's blocks (:data:`CACHE_DIAGNOSTICS`) with its verdict:

- ``agree``: the provider names a change geppetto made too, or none where geppetto made none;
- ``disagree``: the provider names a change geppetto did not make, or none where geppetto made one. It
  is logged (a warning naming both sides), published as an ``EventLog`` and counted
  (:data:`disagreement_metrics`; ``geppetto_prefix_disagreements_total{provider}`` in Prometheus,
  ``geppetto.prefix.disagreements`` in OpenTelemetry with ``geppetto.observability.instrument()``);
- ``inconclusive``: the provider could not compare (the earlier request unknown to it, its comparison
  still running, no answer at all).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..events import EventLog, metadata_for, publish
from ..turns import Block, Turn, block_meta_key

__all__ = [
    "CACHE_DIAGNOSTICS",
    "DISAGREEMENT_METRICS",
    "DisagreementMetrics",
    "disagreement_metrics",
    "record_verdict",
]

log = logging.getLogger("geppetto.providers.disagreements")

CACHE_DIAGNOSTICS = block_meta_key("geppetto", "cache_diagnostics", 1, dict)
"""``geppetto.cache_diagnostics@v1`` on the blocks of an answer whose request asked the provider for its
diagnostics: ``{"previous": the earlier response compared with (None on the first request), "reported":
the provider's diagnostics as it sent them, "expected": the parts geppetto changed since the earlier
request, "verdict": "agree" | "disagree" | "inconclusive"}``."""

DISAGREEMENT_METRICS: dict[str, tuple[str, str, str, str]] = {
    "disagreements": (
        "geppetto_prefix_disagreements",
        "Requests whose provider-reported first divergence disagreed with geppetto's own record of what changed, "
        "by provider",
        "counter",
        "provider",
    ),
}
"""The metric's one definition, key -> (name, description, kind, label), in the form of the Responses
engine's table; every exporter builds its instruments from it."""


class _Prometheus:
    """:data:`DISAGREEMENT_METRICS` as ``prometheus_client`` counters in ``registry`` (default: its global one)."""

    def __init__(self, client: Any, registry: Any) -> None:
        kw = {} if registry is None else {"registry": registry}
        self.counters = {
            key: client.Counter(name, description, [label], **kw)
            for key, (name, description, kind, label) in DISAGREEMENT_METRICS.items()
            if kind == "counter"
        }

    def count(self, key: str, labels: dict[str, str]) -> None:
        self.counters[key].labels(**labels).inc()


class DisagreementMetrics:
    """In-process counts of disagreements by provider (thread-safe), also sent to Prometheus when
    ``prometheus_client`` is installed, and to any exporter added (``count(key, labels)``)."""

    def __init__(self, registry: Any = None) -> None:
        self.counters: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._exporters: tuple[Any, ...] = ()
        self._registry = registry
        self._prometheus: bool | None = None  # set up on first use: importing an engine stays light

    def _with_prometheus(self) -> None:
        """Add the Prometheus exporter the first time it is needed (the caller holds the lock)."""
        if self._prometheus is not None:
            return
        self._prometheus = False
        try:  # optional extra: geppetto[prometheus]
            import prometheus_client
        except ImportError:  # pragma: no cover - depends on the environment
            return
        with contextlib.suppress(ValueError):  # already registered in that registry by another instance
            self._exporters = (*self._exporters, _Prometheus(prometheus_client, self._registry))
            self._prometheus = True

    def add_exporter(self, exporter: Any) -> Any:
        with self._lock:
            self._with_prometheus()
            self._exporters = (*self._exporters, exporter)
        return exporter

    def remove_exporter(self, exporter: Any) -> None:
        with self._lock:
            self._exporters = tuple(e for e in self._exporters if e is not exporter)

    def count(self, provider: str) -> None:
        """Count one disagreement reported by ``provider``."""
        with self._lock:
            self._with_prometheus()
            self.counters[provider] += 1
            exporters = self._exporters
        for exporter in exporters:
            exporter.count("disagreements", {"provider": provider})

    def snapshot(self) -> dict[str, int]:
        """The counts by provider: ``{"anthropic": 1}``."""
        with self._lock:
            return dict(self.counters)

    def reset(self) -> None:
        """Forget the in-process counts (Prometheus counters are monotonic and stay)."""
        with self._lock:
            self.counters.clear()


disagreement_metrics = DisagreementMetrics()
"""The process-wide counts every engine records into."""


def record_verdict(
    turn: Turn,
    new: Iterable[Block],
    *,
    provider: str,
    model: str,
    previous: str | None,
    reported: Any,
    expected: list[str],
    verdict: str,
    said: str,
) -> dict[str, Any]:
    """Keep the provider's diagnostics and the verdict on the answer's blocks ``new``; a ``disagree`` is
    logged, published and counted. ``said``: the provider's finding in words, for the warning."""
    record = {"previous": previous, "reported": reported, "expected": list(expected), "verdict": verdict}
    for block in new:
        CACHE_DIAGNOSTICS.set(block.metadata, dict(record))
    if verdict == "disagree":
        disagreement_metrics.count(provider)
        own = ", ".join(expected) if expected else "nothing"
        message = (
            f"{provider}: the provider's cache diagnostics against {previous} say {said}, but geppetto changed "
            f"{own} since that request: the server holds a different prefix than the one geppetto proved "
            "(a proxy or gateway rewriting requests, or a bug to report with both requests)"
        )
        log.warning("%s", message)
        publish(
            EventLog(
                metadata_for(turn, provider, model),
                "warning",
                message,
                {"previous": str(previous), "provider_says": said, "geppetto_changed": own},
            )
        )
    return record
