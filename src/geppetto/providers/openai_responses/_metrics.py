"""Counters and histograms for the Responses engine, readable in-process and exported to Prometheus.

``metrics.snapshot()`` returns the counters (``chained``, ``stateless``, ``conversation``, ``fallback``,
per fallback reason) and the histogram samples (delta items per request, anchor-selection seconds).
When ``prometheus_client`` is installed the same numbers go to its default registry.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ResponsesMetrics", "metrics"]

_MAX_SAMPLES = 10_000

_prom: Any
try:  # optional extra: geppetto[prometheus]
    import prometheus_client

    _prom = prometheus_client
except ImportError:  # pragma: no cover - depends on the environment
    _prom = None


@dataclass
class ResponsesMetrics:
    """In-process metrics; thread-safe. Histograms keep the latest 10,000 samples."""

    counters: Counter[str] = field(default_factory=Counter)
    delta_items: list[int] = field(default_factory=list)
    anchor_seconds: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _prom: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if _prom is None:
            return
        try:
            self._prom = {
                "requests": _prom.Counter("geppetto_responses_requests", "Responses requests by mode", ["mode"]),
                "fallbacks": _prom.Counter(
                    "geppetto_responses_fallbacks", "Full-Turn resends in chained/conversation mode", ["reason"]
                ),
                "delta": _prom.Histogram(
                    "geppetto_responses_delta_items",
                    "Input items per request",
                    buckets=(0, 1, 2, 4, 8, 16, 32, 64, 128, 512),
                ),
                "anchor": _prom.Histogram("geppetto_responses_anchor_seconds", "Anchor selection time"),
            }
        except ValueError:  # already registered by another instance
            self._prom = {}

    def request(self, mode: str, delta_items: int) -> None:
        """Count one request sent in ``mode`` with ``delta_items`` input items."""
        with self._lock:
            self.counters[mode] += 1
            self._sample(self.delta_items, delta_items)
        if self._prom:
            self._prom["requests"].labels(mode=mode).inc()
            self._prom["delta"].observe(delta_items)

    def fallback(self, reason: str) -> None:
        """Count one full-Turn resend where server state could not be used; ``reason`` is a short tag."""
        with self._lock:
            self.counters["fallback"] += 1
            self.counters[f"fallback:{reason}"] += 1
        if self._prom:
            self._prom["fallbacks"].labels(reason=reason).inc()

    def anchor_time(self, seconds: float) -> None:
        """Record how long anchor selection took."""
        with self._lock:
            self._sample(self.anchor_seconds, seconds)
        if self._prom:
            self._prom["anchor"].observe(seconds)

    @staticmethod
    def _sample(samples: list[Any], value: Any) -> None:
        samples.append(value)
        if len(samples) > _MAX_SAMPLES:
            del samples[: len(samples) - _MAX_SAMPLES]

    def snapshot(self) -> dict[str, Any]:
        """A copy: ``{"counters": {...}, "delta_items": [...], "anchor_seconds": [...]}``."""
        with self._lock:
            return {
                "counters": dict(self.counters),
                "delta_items": list(self.delta_items),
                "anchor_seconds": list(self.anchor_seconds),
            }

    def reset(self) -> None:
        """Forget everything recorded in-process (Prometheus counters are monotonic and stay)."""
        with self._lock:
            self.counters.clear()
            self.delta_items.clear()
            self.anchor_seconds.clear()


metrics = ResponsesMetrics()
"""The process-wide metrics every ResponsesEngine records into."""
