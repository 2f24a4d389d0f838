"""Observability: OpenTelemetry traces and metrics in the GenAI semantic conventions.

``geppetto.observability.instrument()`` (needs the ``otel`` extra, ``opentelemetry-api``) makes every
session run, provider call and tool call a span, and records the GenAI client metrics, through the
tracer and meter providers the application configured. Nothing here is imported by ``import geppetto``;
without ``instrument()`` there is no cost. See docs/observability.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._extras import install_hint

if TYPE_CHECKING:
    from ._otel import Instrumentation

__all__ = ["instrument"]


def instrument(
    tracer_provider: Any = None,
    meter_provider: Any = None,
    *,
    capture_content: bool = False,
    propagate: bool = False,
) -> Instrumentation:
    """Start emitting spans and metrics; returns the :class:`Instrumentation`, whose ``uninstrument()``
    stops it. ``tracer_provider``/``meter_provider`` default to OpenTelemetry's global ones.
    ``capture_content`` records prompts and answers (``gen_ai.input.messages``, ``gen_ai.output.messages``);
    off by default. ``propagate`` adds a W3C ``traceparent`` header to provider requests; off by default."""
    try:
        from ._otel import Instrumentation
    except ImportError as exc:
        raise ImportError(
            f"geppetto.observability needs the 'otel' extra ({exc.name} is not installed): {install_hint('otel')}",
            name=exc.name,
        ) from None
    return Instrumentation(tracer_provider, meter_provider, capture_content=capture_content, propagate=propagate)
