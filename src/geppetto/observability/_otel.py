"""Events and hooks turned into OpenTelemetry spans and metrics (GenAI semantic conventions).

Spans: ``invoke_agent geppetto`` around each inference a :class:`~geppetto.Session` runs (session, turn
and inference ids); ``chat {model}`` for each provider call inside it (provider, request and response
model, response id, finish reasons, token usage, server address; on the Responses engine also how the
request carried its context: mode, anchor, items sent, whether it was the whole Turn, fallback reason,
request bytes); ``execute_tool {name}`` for each tool call (call id, error type). A failed call or tool
has status ERROR and ``error.type``. Metrics: ``gen_ai.client.token.usage`` and
``gen_ai.client.operation.duration`` histograms, and the Responses engine's counters (see
:mod:`geppetto.providers.openai_responses._metrics`, which defines them once for Prometheus and OTel).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..events import (
    Event,
    EventError,
    EventFinal,
    EventInterrupt,
    EventStart,
    EventToolCallStarted,
    EventToolResult,
    add_global_sink,
)
from ..providers import _http
from ..session import _session
from ..turns import TURN_META_INFERENCE_ID, TURN_META_SESSION_ID, BlockKind, Turn

__all__ = ["PROVIDER_NAMES", "Instrumentation"]

PROVIDER_NAMES = {"openai": "openai", "openai_chat": "openai", "anthropic": "anthropic", "gemini": "gcp.gemini"}
"""geppetto's provider names as the conventions' ``gen_ai.provider.name`` values."""

_SCOPE = "geppetto"
_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
_RESPONSES_EXTRA = {
    "responses.mode": "geppetto.responses.mode",
    "responses.anchor": "geppetto.responses.anchor",
    "responses.items": "geppetto.responses.items",
    "responses.full": "geppetto.responses.full_turn",
    "responses.fallback": "geppetto.responses.fallback_reason",
}


def _key(meta: Any) -> tuple[str, str]:
    return (meta.inference_id or meta.turn_id, meta.provider)


class Instrumentation:
    """The installed instrumentation; :meth:`uninstrument` removes it."""

    def __init__(
        self, tracer_provider: Any = None, meter_provider: Any = None, *, capture_content: bool, propagate: bool
    ) -> None:
        self.tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
        meter = otel_metrics.get_meter(_SCOPE, meter_provider=meter_provider)
        self.capture_content = capture_content
        self.propagate = propagate
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=list(_TOKEN_BUCKETS),
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=list(_DURATION_BUCKETS),
        )
        self._calls: dict[tuple[str, str], tuple[Any, Any, float]] = {}  # open chat spans, context tokens, start
        self._tools: dict[str, Any] = {}  # open tool spans by call id
        from ..providers.openai_responses._metrics import metrics as responses_metrics

        self._responses_metrics = responses_metrics
        self._exporter = responses_metrics.add_exporter(_OtelResponsesExporter(meter))
        self._remove_sink = add_global_sink(self._on_event)
        _session.RUN_HOOKS.append(self._run_span)
        _session.INCOMING_HOOKS.append(self._incoming)
        _http.REQUEST_HOOKS.append(self._on_request)

    def uninstrument(self) -> None:
        """Stop emitting (spans already open end as they finish)."""
        self._remove_sink()
        with contextlib.suppress(ValueError):
            _session.RUN_HOOKS.remove(self._run_span)
        with contextlib.suppress(ValueError):
            _session.INCOMING_HOOKS.remove(self._incoming)
        with contextlib.suppress(ValueError):
            _http.REQUEST_HOOKS.remove(self._on_request)
        self._responses_metrics.remove_exporter(self._exporter)

    # -- Session.run ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _run_span(self, turn: Turn) -> Iterator[None]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "geppetto",
            "gen_ai.conversation.id": TURN_META_SESSION_ID.get(turn.metadata) or "",
            "geppetto.turn.id": turn.id,
            "geppetto.inference.id": TURN_META_INFERENCE_ID.get(turn.metadata) or "",
        }
        if self.capture_content:
            attributes["gen_ai.input.messages"] = _messages(turn)
        with self.tracer.start_as_current_span(
            "invoke_agent geppetto", kind=SpanKind.INTERNAL, attributes=attributes, end_on_exit=True
        ) as span:
            try:
                yield
            except BaseException as exc:
                span.set_attribute("error.type", type(exc).__name__)
                span.set_status(Status(StatusCode.ERROR, str(exc)[:500]))
                raise

    # -- requests to geppetto serve ---------------------------------------------------------------
    @contextlib.contextmanager
    def _incoming(self, headers: Mapping[str, str]) -> Iterator[None]:
        """An incoming ``traceparent`` (and ``tracestate``) as the current context, so the inference the
        request starts is a child of the caller's span."""
        if "traceparent" not in headers:
            yield
            return
        token = otel_context.attach(extract(headers))
        try:
            yield
        finally:
            otel_context.detach(token)

    # -- provider requests ------------------------------------------------------------------------
    def _on_request(self, url: str, headers: dict[str, str], size: int) -> None:
        span = trace.get_current_span()
        if span.is_recording():
            parts = urlsplit(url)
            attributes: dict[str, Any] = {"server.address": parts.hostname or "", "http.request.body.size": size}
            if parts.port:
                attributes["server.port"] = parts.port
            span.set_attributes(attributes)
        if self.propagate:
            inject(headers)

    # -- events -----------------------------------------------------------------------------------
    def _on_event(self, event: Event) -> None:
        if isinstance(event, EventStart):
            self._start_call(event)
        elif isinstance(event, EventFinal):
            self._end_call(event, None)
        elif isinstance(event, EventError | EventInterrupt):
            self._end_call(event, event)
        elif isinstance(event, EventToolCallStarted):
            self._tools[event.call_id] = self.tracer.start_span(
                f"execute_tool {event.name}",
                kind=SpanKind.INTERNAL,
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": event.name,
                    "gen_ai.tool.call.id": event.call_id,
                    "gen_ai.tool.type": "function",
                },
            )
        elif isinstance(event, EventToolResult):
            self._end_tool(event)

    def _start_call(self, event: EventStart) -> None:
        meta = event.metadata
        provider = PROVIDER_NAMES.get(meta.provider, meta.provider)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": meta.model,
        }
        span = self.tracer.start_span(f"chat {meta.model}", kind=SpanKind.CLIENT, attributes=attributes)
        # Current while the request runs, so the transport's hook sees it (body size, traceparent).
        token = otel_context.attach(trace.set_span_in_context(span))
        old = self._calls.pop(_key(meta), None)
        if old is not None:  # a call that never finished (cancelled without an event): close it
            old[0].end()
        self._calls[_key(meta)] = (span, token, time.monotonic())

    def _end_call(self, event: Event, failure: Event | None) -> None:
        meta = event.metadata
        found = self._calls.pop(_key(meta), None)
        if found is None:
            return
        span, token, started = found
        with contextlib.suppress(ValueError):  # detached in another context: nothing to restore
            otel_context.detach(token)
        provider = PROVIDER_NAMES.get(meta.provider, meta.provider)
        common = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": meta.model,
        }
        if failure is None:
            assert isinstance(event, EventFinal)
            self._finish(span, event, common)
        else:
            kind = getattr(failure, "error_type", "") or ("cancelled" if isinstance(failure, EventInterrupt) else "")
            message = getattr(failure, "message", "") or getattr(failure, "reason", "")
            span.set_attribute("error.type", kind or "error")
            span.set_status(Status(StatusCode.ERROR, str(message)[:500]))
            common["error.type"] = kind or "error"
        self.duration.record(time.monotonic() - started, common)
        span.end()

    def _finish(self, span: Any, event: EventFinal, common: dict[str, Any]) -> None:
        meta = event.metadata
        extra = meta.extra
        response_model = str(extra.get("response_model") or meta.model)
        attributes: dict[str, Any] = {"gen_ai.response.model": response_model}
        if extra.get("response_id"):
            attributes["gen_ai.response.id"] = str(extra["response_id"])
        if meta.stop_reason:
            attributes["gen_ai.response.finish_reasons"] = [meta.stop_reason]
        usage = meta.usage
        if usage is not None:
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
            if usage.cached_tokens:  # each attribute costs the SDK a check: only the ones that say something
                attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
            if usage.reasoning_tokens:
                attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
            measured = {**common, "gen_ai.response.model": response_model}
            self.token_usage.record(usage.input_tokens, {**measured, "gen_ai.token.type": "input"})
            self.token_usage.record(usage.output_tokens, {**measured, "gen_ai.token.type": "output"})
        for key, name in _RESPONSES_EXTRA.items():
            value = extra.get(key)
            if value is not None and value != "":
                attributes[name] = value
        if self.capture_content:
            attributes["gen_ai.output.messages"] = json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": event.text}]}]
            )
        span.set_attributes(attributes)  # one call: each set_attribute takes the span's lock

    def _end_tool(self, event: EventToolResult) -> None:
        span = self._tools.pop(event.call_id, None)
        if span is None:  # a call that never started (unknown tool, bad arguments): a span of no length
            span = self.tracer.start_span(
                f"execute_tool {event.name}",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": event.name,
                    "gen_ai.tool.call.id": event.call_id,
                },
            )
        if event.error is not None:
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR, event.error[:500]))
        span.end()


def _messages(turn: Turn) -> str:
    """The turn's messages in the conventions' shape (role and text parts), as JSON."""
    out = []
    for block in turn.blocks:
        if block.kind in (BlockKind.SYSTEM, BlockKind.USER, BlockKind.LLM_TEXT) and block.text:
            out.append({"role": block.role, "parts": [{"type": "text", "content": block.text}]})
    return json.dumps(out)


class _OtelResponsesExporter:
    """The Responses engine's metrics (defined once in ``_metrics.METRICS``) as OpenTelemetry instruments."""

    def __init__(self, meter: Any) -> None:
        from ..providers.openai_responses._metrics import METRICS

        self.instruments: dict[str, Any] = {}
        for key, (name, description, kind, _label) in METRICS.items():
            if key == "anchor":  # a timing of geppetto's own, for its benchmarks: Prometheus only
                continue
            otel_name = name.replace("geppetto_responses_", "geppetto.responses.")
            if kind == "counter":
                self.instruments[key] = meter.create_counter(otel_name, description=description)
            else:
                self.instruments[key] = meter.create_histogram(otel_name, description=description)

    def count(self, key: str, labels: dict[str, str]) -> None:
        self.instruments[key].add(1, labels)

    def observe(self, key: str, value: float) -> None:
        instrument = self.instruments.get(key)
        if instrument is not None:
            instrument.record(value)
