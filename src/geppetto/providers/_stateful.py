"""What the two stateful engines share beyond the anchor proof (``_chain``): the kill switch, the metrics both
count in, and the result of a validation with the server.

The Responses engine (``openai_responses``) and the Gemini Interactions engine (``gemini``) both import it;
neither imports the other's private modules. See docs/responses.md and docs/observability.md.

The kill switch (for rollout and rollback): ``GEPPETTO_CHAINING=off`` turns chaining and
conversation mode off for every Responses engine in the process.

Read on every request, so it applies to engines built before it was set, to every profile and to every
session ``geppetto serve`` runs; requests then go stateless (the whole Turn, no ``previous_response_id``,
no conversation), each with a logged reason. The gauge ``geppetto_responses_chaining_enabled`` (1/0)
says whether chaining is on.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from geppetto._exceptions import ConfigurationError

__all__ = [
    "CHAINING_ENV",
    "FALLBACK_REASONS",
    "GAUGES",
    "METRICS",
    "ResponsesMetrics",
    "chaining_enabled",
    "chaining_gauge",
    "metrics",
]


# -- the kill switch ------------------------------------------------------------------------------------------

CHAINING_ENV = "GEPPETTO_CHAINING"
"""The environment variable of the kill switch: ``off`` turns chaining and conversation mode off."""

_OFF = frozenset({"off", "0", "false", "no", "disabled"})
_ON = frozenset({"", "on", "1", "true", "yes", "enabled"})


def chaining_enabled() -> bool:
    """False when ``GEPPETTO_CHAINING`` says off; raises ``ConfigurationError`` for a value it does not know
    (a mistyped ``off`` must not leave chaining on unnoticed)."""
    value = os.environ.get(CHAINING_ENV, "").strip().lower()
    if value in _OFF:
        return False
    if value in _ON:
        return True
    raise ConfigurationError(
        f"{CHAINING_ENV}={os.environ[CHAINING_ENV]!r} is not understood: set it to 'off' to send every "
        "request stateless, or 'on' (or unset it) to allow chaining"
    )


# -- metrics -------------------------------------------------------------------------------------------------
# Counters and histograms for the Responses engine, readable in-process and exported to Prometheus.
#
# ``metrics.snapshot()`` returns the counters and histogram samples:
#
# - ``chained``: requests sent with ``previous_response_id``; ``conversation``: requests sent in a
#   conversation; ``stateless``: requests with neither (stateless mode, or the first request of a chain);
# - ``fallback`` and ``fallback:<reason>``: requests that re-sent the whole Turn although the mode keeps
#   state on the server, by reason code (``FALLBACK_REASONS``; the detailed text is in the log);
# - ``delta_items``: input items of requests that sent only what the server has not seen;
#   ``full_items``: input items of requests that sent the whole Turn (first requests, fallbacks,
#   stateless mode, the seed of a new conversation included);
# - ``anchor_seconds``: time spent selecting the anchor;
# - ``validation:<result>``: validations with the server (``match``, ``mismatch``, ``error``);
# - ``retried_unknown`` and ``retried_unknown:<provider>``: requests of any engine sent again although the
#   earlier attempt may have reached the server and nothing could prove it did not (``providers._landed``);
# - ``chaining_enabled``: 1 while chaining and conversation mode are on, 0 while the kill switch
#   ``GEPPETTO_CHAINING=off`` sends every request stateless (a gauge, read when asked).
#
# When ``prometheus_client`` is installed the same numbers go to its default registry (or the one given):
# ``geppetto_responses_requests_total{mode}``, ``geppetto_responses_fallbacks_total{reason}``,
# ``geppetto_responses_delta_items``, ``geppetto_responses_full_items``, ``geppetto_responses_anchor_seconds``,
# ``geppetto_responses_validations_total{result}``,
# ``geppetto_requests_retried_unknown_outcome_total{provider}``, the gauge ``geppetto_responses_chaining_enabled``.


_MAX_SAMPLES = 10_000
_ITEM_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 512, 2048)

FALLBACK_REASONS = (
    "not_contiguous",
    "not_anchorable",
    "not_tagged",
    "response_incomplete",
    "fingerprint_mismatch",
    "empty_delta",
    "previous_response_not_found",
    "conversation_not_found",
    "conversation_not_empty",
    "repair_failed",
    "item_not_found",
    "server_ignores_state",
    "interaction_not_found",
    "store_off",
    "connection_state_lost",
    "other",
)
"""The reason codes a fallback is counted under (a fixed set: they are Prometheus label values)."""

_prom: Any
try:  # optional extra: geppetto[prometheus]
    import prometheus_client

    _prom = prometheus_client
except ImportError:  # pragma: no cover - depends on the environment
    _prom = None


METRICS: dict[str, tuple[str, str, str, str]] = {
    "requests": (
        "geppetto_responses_requests",
        "Responses requests by how they carried the context",
        "counter",
        "mode",
    ),
    "fallbacks": (
        "geppetto_responses_fallbacks",
        "Whole-Turn resends in chained/conversation mode",
        "counter",
        "reason",
    ),
    "validations": (
        "geppetto_responses_validations",
        "Comparisons of the server's stored context with the Turn, by result",
        "counter",
        "result",
    ),
    "reasoning_dropped": (
        "geppetto_responses_reasoning_dropped",
        "Replayed reasoning items the prefix guard left out because their prefix changed, by policy",
        "counter",
        "policy",
    ),
    "retried_unknown": (
        "geppetto_requests_retried_unknown_outcome",
        "Requests sent again although the earlier attempt may have reached the server and nothing could prove "
        "it did not, by provider",
        "counter",
        "provider",
    ),
    "delta": ("geppetto_responses_delta_items", "Input items of delta requests", "histogram", ""),
    "full": ("geppetto_responses_full_items", "Input items of whole-Turn requests", "histogram", ""),
    "anchor": ("geppetto_responses_anchor_seconds", "Anchor selection time", "histogram", ""),
    "chaining": (
        "geppetto_responses_chaining_enabled",
        "1 while chaining and conversation mode are on, 0 while GEPPETTO_CHAINING=off sends every request stateless",
        "gauge",
        "",
    ),
}
"""The one definition of the engine's metrics: key -> (name, description, kind, label). Every exporter
(Prometheus here, OpenTelemetry in :mod:`geppetto.observability`) builds its instruments from it."""


def chaining_gauge() -> float:
    """The value of the ``chaining`` gauge: 1.0 when chaining is on, 0.0 when the kill switch is off (or its
    value is not understood: every request then fails with an error naming the fix, so nothing chains)."""
    try:
        return 1.0 if chaining_enabled() else 0.0
    except ValueError:
        return 0.0


GAUGES: dict[str, Callable[[], float]] = {"chaining": chaining_gauge}
"""How each gauge of :data:`METRICS` is read (at collection time; nothing is recorded per request)."""


class _PrometheusExporter:
    """The metrics of ``table`` (a table in the form of :data:`METRICS`) in a ``prometheus_client`` registry."""

    def __init__(self, registry: Any, table: dict[str, tuple[str, str, str, str]] = METRICS) -> None:
        kw = {} if registry is None else {"registry": registry}
        self.instruments: dict[str, Any] = {}
        for key, (name, description, kind, label) in table.items():
            if kind == "counter":
                self.instruments[key] = _prom.Counter(name, description, [label], **kw)
            elif kind == "gauge":
                gauge = self.instruments[key] = _prom.Gauge(name, description, **kw)
                gauge.set_function(GAUGES[key])
            elif key in ("delta", "full"):
                self.instruments[key] = _prom.Histogram(name, description, buckets=_ITEM_BUCKETS, **kw)
            else:
                self.instruments[key] = _prom.Histogram(name, description, **kw)

    def count(self, key: str, labels: dict[str, str], amount: int = 1) -> None:
        self.instruments[key].labels(**labels).inc(amount)

    def observe(self, key: str, value: float) -> None:
        self.instruments[key].observe(value)


@dataclass
class ResponsesMetrics:
    """In-process metrics; thread-safe. Histograms keep the latest 10,000 samples.

    ``registry``: a ``prometheus_client.CollectorRegistry`` to export to (default: its global one).
    """

    registry: Any = None
    counters: Counter[str] = field(default_factory=Counter)
    delta_items: list[int] = field(default_factory=list)
    full_items: list[int] = field(default_factory=list)
    anchor_seconds: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _exporters: tuple[Any, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if _prom is None:
            return
        try:
            self._exporters = (_PrometheusExporter(self.registry),)
        except ValueError:  # already registered in that registry by another instance
            self._exporters = ()

    def add_exporter(self, exporter: Any) -> Any:
        """Send every later record to ``exporter`` too (``count(key, labels)``, ``observe(key, value)``,
        keys from :data:`METRICS`); returns it, for :meth:`remove_exporter`."""
        with self._lock:
            self._exporters = (*self._exporters, exporter)
        return exporter

    def remove_exporter(self, exporter: Any) -> None:
        with self._lock:
            self._exporters = tuple(e for e in self._exporters if e is not exporter)

    def request(self, mode: str, items: int, *, full: bool) -> None:
        """Count one request: ``mode`` is ``chained``, ``conversation`` or ``stateless`` (how it carried
        the context); ``items`` input items; ``full`` when they are the whole Turn."""
        with self._lock:
            self.counters[mode] += 1
            self._sample(self.full_items if full else self.delta_items, items)
        for exporter in self._exporters:
            exporter.count("requests", {"mode": mode})
            exporter.observe("full" if full else "delta", items)

    def fallback(self, reason: str) -> None:
        """Count one whole-Turn resend where server state could not be used; ``reason`` is a code from
        ``FALLBACK_REASONS`` (anything else counts as ``other``)."""
        code = reason if reason in FALLBACK_REASONS else "other"
        with self._lock:
            self.counters["fallback"] += 1
            self.counters[f"fallback:{code}"] += 1
        for exporter in self._exporters:
            exporter.count("fallbacks", {"reason": code})

    def reasoning_dropped(self, count: int, policy: str) -> None:
        """Count ``count`` replayed reasoning items the prefix guard left out (``policy``: drop or rewrite)."""
        with self._lock:
            self.counters["reasoning_dropped"] += count
        for exporter in self._exporters:
            for _ in range(count):  # one count per item: every exporter counts one at a time
                exporter.count("reasoning_dropped", {"policy": policy})

    def retried_unknown(self, provider: str) -> None:
        """Count one request sent again with the outcome of its earlier attempt unknown (``provider``)."""
        with self._lock:
            self.counters["retried_unknown"] += 1
            self.counters[f"retried_unknown:{provider}"] += 1
        for exporter in self._exporters:
            exporter.count("retried_unknown", {"provider": provider})

    def validation(self, result: str) -> None:
        """Count one validation with the server: ``match``, ``mismatch`` or ``error``."""
        with self._lock:
            self.counters[f"validation:{result}"] += 1
        for exporter in self._exporters:
            exporter.count("validations", {"result": result})

    def anchor_time(self, seconds: float) -> None:
        """Record how long anchor selection took."""
        with self._lock:
            self._sample(self.anchor_seconds, seconds)
        for exporter in self._exporters:
            exporter.observe("anchor", seconds)

    @staticmethod
    def _sample(samples: list[Any], value: Any) -> None:
        samples.append(value)
        if len(samples) > _MAX_SAMPLES:
            del samples[: len(samples) - _MAX_SAMPLES]

    def snapshot(self) -> dict[str, Any]:
        """A copy: ``{"counters", "delta_items", "full_items", "anchor_seconds", "chaining_enabled"}``."""
        with self._lock:
            return {
                "chaining_enabled": chaining_gauge(),
                "counters": dict(self.counters),
                "delta_items": list(self.delta_items),
                "full_items": list(self.full_items),
                "anchor_seconds": list(self.anchor_seconds),
            }

    def reset(self) -> None:
        """Forget everything recorded in-process (Prometheus counters are monotonic and stay)."""
        with self._lock:
            self.counters.clear()
            self.delta_items.clear()
            self.full_items.clear()
            self.anchor_seconds.clear()


metrics = ResponsesMetrics()
"""The process-wide metrics every ResponsesEngine records into unless given its own."""


# -- validation -----------------------------------------------------------------------------------------------


@dataclass
class Validation:
    """What a validation found: ``matches`` is None when there was nothing to compare (stateless, or no
    anchor: the next request sends the whole Turn anyway); ``requests`` counts the reads it made."""

    response_id: str | None
    matches: bool | None
    detail: str = ""
    requests: int = 0
    server: list[tuple[Any, ...]] = field(default_factory=list, repr=False)
    turn: list[tuple[Any, ...]] = field(default_factory=list, repr=False)
