"""Events and hooks turned into OpenTelemetry spans and metrics (GenAI semantic conventions).

Spans: ``invoke_agent geppetto`` around each inference a :class:`~geppetto.Session` runs (session, turn
and inference ids); ``chat {model}`` for each provider call inside it (provider, request and response
model, response id, finish reasons, token usage, server address; on the Responses engine also how the
request carried its context: mode, anchor, items sent, whether it was the whole Turn, fallback reason,
request bytes); ``execute_tool {name}`` for each tool call (call id, error type). A failed call or tool
has status ERROR and ``error.type``. Metrics: ``gen_ai.client.token.usage`` and
``gen_ai.client.operation.duration`` histograms, the ``geppetto.client.cost`` counter (USD of each priced
request; ``geppetto.client.unpriced_requests`` counts the others), and the Responses engine's counters (see
:mod:`geppetto.providers._stateful`, which defines them once for Prometheus and OTel) and
``geppetto.prefix.disagreements`` (provider cache diagnostics that disagreed with geppetto's record,
:mod:`geppetto.providers._disagreements`).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

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
from ..providers import REQUEST_HOOKS
from ..session import INCOMING_HOOKS, RUN_HOOKS
from ..turns import TURN_META_INFERENCE_ID, TURN_META_PROVIDER, TURN_META_SESSION_ID, Turn
from ._otel_metrics import disagreements_exporter, responses_exporter
from ._otel_spans import Call, RunSpan, messages_attribute, server_attributes

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
        self.cost = meter.create_counter(
            "geppetto.client.cost",
            unit="USD",
            description="Cost of provider requests, priced from their reported usage (unpriced ones not counted)",
        )
        self.unpriced = meter.create_counter(
            "geppetto.client.unpriced_requests",
            unit="{request}",
            description="Provider requests that could not be priced (unknown model or no usage reported)",
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=list(_DURATION_BUCKETS),
        )
        self._calls: dict[tuple[str, str], Call] = {}  # open provider calls by (inference, provider)
        self._tools: dict[str, Any] = {}  # open tool spans by call id
        # Attribute dicts that repeat from call to call, made once (the SDK copies what it keeps).
        self._call_attributes: dict[tuple[str, str], dict[str, Any]] = {}
        self._token_attributes: dict[tuple[str, str, str], tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}
        self._server_attributes: dict[str, dict[str, Any]] = {}  # by host:port
        self._handlers: dict[type, Any] = {}
        from ..providers.openai_responses import metrics as responses_metrics

        self._responses_metrics = responses_metrics
        self._exporter = responses_metrics.add_exporter(responses_exporter(meter))
        from ..providers import disagreement_metrics

        self._disagreement_metrics = disagreement_metrics
        self._disagreement_exporter = disagreement_metrics.add_exporter(disagreements_exporter(meter))
        self._remove_sink = add_global_sink(self._on_event)
        RUN_HOOKS.append(self._run_span)
        INCOMING_HOOKS.append(self._incoming)
        REQUEST_HOOKS.append(self._on_request)

    def uninstrument(self) -> None:
        """Stop emitting (spans already open end as they finish)."""
        self._remove_sink()
        with contextlib.suppress(ValueError):
            RUN_HOOKS.remove(self._run_span)
        with contextlib.suppress(ValueError):
            INCOMING_HOOKS.remove(self._incoming)
        with contextlib.suppress(ValueError):
            REQUEST_HOOKS.remove(self._on_request)
        self._responses_metrics.remove_exporter(self._exporter)
        self._disagreement_metrics.remove_exporter(self._disagreement_exporter)

    # -- Session.run ------------------------------------------------------------------------------
    def _run_span(self, turn: Turn, provider: str = "") -> RunSpan:
        provider = provider or TURN_META_PROVIDER.get(turn.metadata) or ""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            # required by the conventions; an engine that names no provider is "_OTHER", as they spell it
            "gen_ai.provider.name": PROVIDER_NAMES.get(provider, provider) or "_OTHER",
            "gen_ai.agent.name": "geppetto",
            "gen_ai.conversation.id": TURN_META_SESSION_ID.get(turn.metadata) or "",
            "geppetto.turn.id": turn.id,
            "geppetto.inference.id": TURN_META_INFERENCE_ID.get(turn.metadata) or "",
        }
        if self.capture_content:
            attributes["gen_ai.input.messages"] = messages_attribute(turn)
        context = otel_context.get_current()
        span = self.tracer.start_span(
            "invoke_agent geppetto", context=context, kind=SpanKind.INTERNAL, attributes=attributes
        )
        return RunSpan(span, trace.set_span_in_context(span, context))

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
        call = _CURRENT_CALL.get()
        if call is not None:  # kept for the span's one set_attributes when the call ends
            origin = url.split("/", 3)[2]  # by host, not URL: paths hold response and conversation ids
            server = self._server_attributes.get(origin)
            if server is None:
                server = self._server_attributes[origin] = server_attributes(url)
            call.request = {**server, "http.request.body.size": size}
        if self.propagate:
            inject(headers)

    # -- events -----------------------------------------------------------------------------------
    def _on_event(self, event: Event) -> None:
        handler = self._handlers.get(event.__class__, _UNSEEN)
        if handler is _UNSEEN:
            handler = self._handlers[event.__class__] = self._handler_for(event.__class__)
        if handler is not None:
            handler(event)

    def _handler_for(self, cls: type) -> Any:
        """The method an event class goes to (its nearest handled base), or None: text deltas and the
        other events no span or metric reads."""
        for base in cls.__mro__:
            if base is EventStart:
                return self._start_call
            if base is EventFinal:
                return self._end_call
            if base is EventError or base is EventInterrupt:
                return self._fail_call
            if base is EventToolCallStarted:
                return self._start_tool
            if base is EventToolResult:
                return self._end_tool
        return None

    def _attributes(self, meta: Any) -> dict[str, Any]:
        """The attributes every span and metric point of a call shares (one dict per provider and model)."""
        key = (meta.provider, meta.model)
        found = self._call_attributes.get(key)
        if found is None:
            found = self._call_attributes[key] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": PROVIDER_NAMES.get(meta.provider, meta.provider),
                "gen_ai.request.model": meta.model,
            }
        return found

    def _start_call(self, event: EventStart) -> None:
        meta = event.metadata
        # The context passed in, here and below, saves the SDK reading the current one three times a span.
        context = otel_context.get_current()
        span = self.tracer.start_span(
            f"chat {meta.model}", context=context, kind=SpanKind.CLIENT, attributes=self._attributes(meta)
        )
        call = Call(span, time.monotonic())
        # Current while the request runs, so the transport's hook, and spans other instrumentation makes
        # for the request, see it (body size, traceparent).
        call.token = otel_context.attach(trace.set_span_in_context(span, context))
        call.mine = _CURRENT_CALL.set(call)
        key = (meta.inference_id or meta.turn_id, meta.provider)
        old = self._calls.get(key)
        if old is not None:  # a call that never finished (cancelled without an event): close it
            old.span.end()
        self._calls[key] = call

    def _close(self, event: Event) -> Call | None:
        meta = event.metadata
        call = self._calls.pop((meta.inference_id or meta.turn_id, meta.provider), None)
        if call is not None:
            try:  # (try, not contextlib.suppress: this runs for every call)
                _CURRENT_CALL.reset(call.mine)
                otel_context.detach(call.token)  # after the reset, so both or neither
            except ValueError:  # ended in another context: nothing to restore
                pass
        return call

    def _end_call(self, event: EventFinal) -> None:
        call = self._close(event)
        if call is None:
            return
        meta = event.metadata
        common = self._attributes(meta)
        response_model = str(meta.extra.get("response_model") or meta.model)
        span = call.span
        if span.is_recording():  # a span the sampler dropped gets no attributes: nothing would keep them
            span.set_attributes(self._final_attributes(event, call.request or {}, response_model))
        usage = meta.usage
        inputs, outputs, measured = self._token_dicts(meta, common, response_model)
        if usage is not None:
            self.token_usage.record(usage.input_tokens, inputs)
            self.token_usage.record(usage.output_tokens, outputs)
        if meta.cost is not None:
            self.cost.add(meta.cost["total"], common)
        else:
            self.unpriced.add(1, common)
        self.duration.record(time.monotonic() - call.started, measured)
        span.end()

    def _final_attributes(self, event: EventFinal, attributes: dict[str, Any], response_model: str) -> dict[str, Any]:
        """Everything learnt during the call, added to ``attributes`` (the request's), for one
        set_attributes call: the SDK takes the span's lock and checks the attributes once per call."""
        meta = event.metadata
        extra = meta.extra
        attributes["gen_ai.response.model"] = response_model
        if extra.get("response_id"):
            attributes["gen_ai.response.id"] = str(extra["response_id"])
        if meta.stop_reason:
            attributes["gen_ai.response.finish_reasons"] = (meta.stop_reason,)
        usage = meta.usage
        if usage is not None:
            attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = usage.output_tokens
            if usage.cached_tokens:  # each attribute costs the SDK a check: only the ones that say something
                attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
            if usage.reasoning_tokens:
                attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
            if usage.cache_write_tokens:
                attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
        if meta.cost is not None:
            attributes["geppetto.usage.cost"] = meta.cost["total"]
        if "responses.mode" in extra:
            for key, name in _RESPONSES_EXTRA.items():
                value = extra.get(key)
                if value is not None and value != "":
                    attributes[name] = value
        if self.capture_content:
            attributes["gen_ai.output.messages"] = json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": event.text}]}]
            )
        return attributes

    def _token_dicts(
        self, meta: Any, common: dict[str, Any], response_model: str
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """The token points' attributes (input, output) and the duration's: the call's and the response model."""
        key = (meta.provider, meta.model, response_model)
        found = self._token_attributes.get(key)
        if found is None:
            measured = {**common, "gen_ai.response.model": response_model}
            found = self._token_attributes[key] = (
                {**measured, "gen_ai.token.type": "input"},
                {**measured, "gen_ai.token.type": "output"},
                measured,
            )
        return found

    def _fail_call(self, event: EventError | EventInterrupt) -> None:
        call = self._close(event)
        if call is None:
            return
        kind = getattr(event, "error_type", "") or ("cancelled" if isinstance(event, EventInterrupt) else "error")
        message = getattr(event, "message", "") or getattr(event, "reason", "")
        span = call.span
        span.set_attributes({**(call.request or {}), "error.type": kind})
        span.set_status(Status(StatusCode.ERROR, str(message)[:500]))
        self.duration.record(time.monotonic() - call.started, {**self._attributes(event.metadata), "error.type": kind})
        span.end()

    def _start_tool(self, event: EventToolCallStarted) -> None:
        self._tools[event.call_id] = self.tracer.start_span(
            f"execute_tool {event.name}",
            context=otel_context.get_current(),
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": event.name,
                "gen_ai.tool.call.id": event.call_id,
                "gen_ai.tool.type": "function",
            },
        )

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
            span.set_attributes({"error.type": "tool_error"})
            span.set_status(Status(StatusCode.ERROR, event.error[:500]))
        span.end()


_CURRENT_CALL: contextvars.ContextVar[Call | None] = contextvars.ContextVar("geppetto_otel_call", default=None)
_UNSEEN = object()
