"""OpenTelemetry spans and metrics, read back with the OTel SDK's in-memory exporters (and over OTLP/HTTP)."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK is not installed (the dev extra installs it)")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from geppetto import BadRequestError, Block, Session, Turn
from geppetto.observability import instrument
from geppetto.providers._retry import RetryPolicy
from geppetto.simulator import Simulator
from geppetto.tools import ToolRegistry

FAST = RetryPolicy(max_retries=0)
MODELS = {
    "openai-responses": ("sim-1", "openai"),
    "openai-chat": ("sim-1", "openai"),
    "anthropic": ("claude-sonnet-4-5", "anthropic"),
    "gemini": ("gemini-2.5-flash", "gcp.gemini"),
}


class Otel:
    def __init__(self, **options: Any) -> None:
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.inst = instrument(self.tracer_provider, self.meter_provider, **options)

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def by_name(self) -> dict[str, ReadableSpan]:
        return {s.name: s for s in self.finished()}

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found = []
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found


@pytest.fixture
def otel() -> Iterator[Otel]:
    o = Otel()
    yield o
    o.inst.uninstrument()


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C in {city}"


def broken(city: str) -> str:
    """A weather tool that fails."""
    raise RuntimeError("no data")


@pytest.mark.parametrize("provider", list(MODELS))
async def test_a_session_run_is_an_agent_span_holding_one_chat_span_per_call(
    geppetto_sim: Simulator, otel: Otel, provider: str
) -> None:
    model, provider_name = MODELS[provider]
    async with geppetto_sim.engine(provider, model=model, retry=FAST) as engine:
        session = Session(engine)
        turn = await session.run("Hello there")
    spans = otel.by_name()
    assert set(spans) == {"invoke_agent geppetto", f"chat {model}"}
    run, chat = spans["invoke_agent geppetto"], spans[f"chat {model}"]
    assert chat.parent is not None and chat.parent.span_id == run.context.span_id
    assert chat.context.trace_id == run.context.trace_id
    assert run.attributes["gen_ai.conversation.id"] == session.session_id
    assert run.attributes["geppetto.turn.id"] == turn.id
    assert run.attributes["gen_ai.provider.name"] == provider_name  # required on invoke_agent too
    a = chat.attributes
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == provider_name
    assert a["gen_ai.request.model"] == model and a["gen_ai.response.model"]
    assert a["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
    assert a["server.address"] == "127.0.0.1" and a["server.port"] == int(geppetto_sim.url.rsplit(":", 1)[1])
    assert a["http.request.body.size"] == geppetto_sim.requests[-1].size
    assert "gen_ai.input.messages" not in run.attributes and "gen_ai.output.messages" not in a
    tokens = {p.attributes["gen_ai.token.type"]: p for p in otel.points("gen_ai.client.token.usage")}
    assert tokens["input"].sum == a["gen_ai.usage.input_tokens"] and tokens["output"].count == 1
    assert tokens["input"].attributes["gen_ai.provider.name"] == provider_name
    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert duration.count == 1 and duration.sum > 0
    measured = {k: v for k, v in tokens["input"].attributes.items() if k != "gen_ai.token.type"}
    assert dict(duration.attributes) == measured  # the token points' attributes, as the docs state
    assert duration.attributes["gen_ai.response.model"] == a["gen_ai.response.model"]


async def test_tool_calls_are_spans_beside_the_chat_spans(geppetto_sim: Simulator, otel: Otel) -> None:
    async with geppetto_sim.engine("openai-chat", retry=FAST) as engine:
        await Session(engine, tools=ToolRegistry([get_weather, broken])).run("get_weather and broken for Paris")
    spans = otel.finished()
    names = [s.name for s in spans]
    assert names.count("chat sim-1") == 2 and "execute_tool get_weather" in names
    run = next(s for s in spans if s.name == "invoke_agent geppetto")
    assert run.attributes["gen_ai.provider.name"] == "openai"  # found through the tool loop's wrapper
    tool = next(s for s in spans if s.name == "execute_tool get_weather")
    assert tool.parent is not None and tool.parent.span_id == run.context.span_id
    assert tool.attributes["gen_ai.tool.name"] == "get_weather" and tool.attributes["gen_ai.tool.call.id"]
    assert tool.status.status_code is StatusCode.UNSET


async def test_an_engine_that_names_no_provider_is_other_on_the_agent_span(otel: Otel) -> None:
    class Plain:
        async def run_inference(self, turn: Turn) -> Turn:
            turn.append(Block.llm_text("hi"))
            return turn

    await Session(Plain()).run("hello")
    assert otel.by_name()["invoke_agent geppetto"].attributes["gen_ai.provider.name"] == "_OTHER"


async def test_a_failing_tool_is_an_error_span(geppetto_sim: Simulator, otel: Otel) -> None:
    async with geppetto_sim.engine("anthropic", model="claude-sonnet-4-5", retry=FAST) as engine:
        await Session(engine, tools=ToolRegistry([broken])).run("broken weather for Paris")
    tool = otel.by_name()["execute_tool broken"]
    assert tool.status.status_code is StatusCode.ERROR and tool.attributes["error.type"] == "tool_error"
    assert "no data" in (tool.status.description or "")


async def test_a_rejected_request_is_an_error_on_both_spans(geppetto_sim: Simulator, otel: Otel) -> None:
    geppetto_sim.fail_next(400)
    async with geppetto_sim.engine("gemini", model="gemini-2.5-flash", retry=FAST) as engine:
        with pytest.raises(BadRequestError):
            await Session(engine).run("Hello")
    spans = otel.by_name()
    chat, run = spans["chat gemini-2.5-flash"], spans["invoke_agent geppetto"]
    assert chat.status.status_code is StatusCode.ERROR and chat.attributes["error.type"] == "BadRequestError"
    assert run.status.status_code is StatusCode.ERROR and run.attributes["error.type"] == "BadRequestError"
    (duration,) = otel.points("gen_ai.client.operation.duration")
    assert duration.attributes["error.type"] == "BadRequestError"


@pytest.mark.parametrize(
    ("name", "options", "model", "anchor"),
    [
        ("openai-responses", {"mode": "chained"}, "sim-1", "resp_"),
        ("gemini-interactions", {"model": "gemini-2.5-flash"}, "gemini-2.5-flash", "v1_"),
    ],
)
async def test_stateful_spans_say_how_the_context_travelled_and_why_it_fell_back(
    geppetto_sim: Simulator, otel: Otel, name: str, options: dict[str, str], model: str, anchor: str
) -> None:
    """Both stateful engines (Responses, Interactions) report through the same attributes and instruments."""
    async with geppetto_sim.engine(name, retry=FAST, **options) as engine:
        session = Session(engine)
        await session.run("first")
        await session.run("second")
        assert session.latest is not None
        session.latest.blocks[0].payload["text"] = "first, edited"  # the server's copy no longer matches
        await session.run("third")
    chats = [s for s in otel.finished() if s.name == f"chat {model}"]
    modes = [(s.attributes["geppetto.responses.mode"], s.attributes["geppetto.responses.full_turn"]) for s in chats]
    assert modes == [("stateless", True), ("chained", False), ("stateless", True)]
    assert chats[1].attributes["geppetto.responses.anchor"].startswith(anchor)
    assert chats[1].attributes["geppetto.responses.items"] == 1
    assert chats[2].attributes["geppetto.responses.fallback_reason"] == "fingerprint_mismatch"
    requests = {p.attributes["mode"]: p.value for p in otel.points("geppetto.responses.requests")}
    assert requests == {"stateless": 2, "chained": 1}
    (fallback,) = otel.points("geppetto.responses.fallbacks")
    assert fallback.attributes == {"reason": "fingerprint_mismatch"} and fallback.value == 1


async def test_content_and_traceparent_only_when_asked(geppetto_sim: Simulator) -> None:
    async with geppetto_sim.engine("openai-chat", retry=FAST) as engine:
        quiet = Otel()
        await Session(engine).run("secret prompt")
        quiet.inst.uninstrument()
        assert "traceparent" not in geppetto_sim.requests[-1].headers
        assert "secret prompt" not in str([dict(s.attributes) for s in quiet.finished()])
        loud = Otel(capture_content=True, propagate=True)
        await Session(engine).run("open prompt")
        loud.inst.uninstrument()
    spans = loud.by_name()
    assert "open prompt" in spans["invoke_agent geppetto"].attributes["gen_ai.input.messages"]
    assert "You said: open prompt" in spans["chat sim-1"].attributes["gen_ai.output.messages"]
    chat = spans["chat sim-1"]
    assert (
        geppetto_sim.requests[-1]
        .headers["traceparent"]
        .startswith(  # then the trace flags
            f"00-{chat.context.trace_id:032x}-{chat.context.span_id:016x}-"
        )
    )


async def test_uninstrument_stops_the_spans(geppetto_sim: Simulator) -> None:
    o = Otel()
    o.inst.uninstrument()
    async with geppetto_sim.engine("openai-chat", retry=FAST) as engine:
        await Session(engine).run("Hello")
    assert o.finished() == []


async def test_instrumenting_again_counts_on_in_the_same_meter(geppetto_sim: Simulator) -> None:
    # A meter keeps the first callback of an observable counter: the second instrumentation must feed it.
    o = Otel()
    async with geppetto_sim.engine("openai-responses", retry=FAST) as engine:
        await Session(engine).run("Hello")
        o.inst.uninstrument()
        await Session(engine).run("Not counted")
        again = instrument(o.tracer_provider, o.meter_provider)
        try:
            await Session(engine).run("Hello again")
        finally:
            again.uninstrument()
    (requests,) = o.points("geppetto.responses.requests")
    assert requests.value == 2
    (tokens, *_) = o.points("gen_ai.client.token.usage")
    assert tokens.count == 2


async def test_a_sampled_out_run_makes_no_spans_but_its_metrics(geppetto_sim: Simulator) -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    o = Otel()
    o.tracer_provider = TracerProvider(sampler=ALWAYS_OFF)
    o.tracer_provider.add_span_processor(SimpleSpanProcessor(o.spans))
    o.inst.uninstrument()
    o.inst = instrument(o.tracer_provider, o.meter_provider)
    try:
        async with geppetto_sim.engine("openai-responses", retry=FAST) as engine:
            await Session(engine).run("Hello")
    finally:
        o.inst.uninstrument()
    assert o.finished() == []
    tokens = {p.attributes["gen_ai.token.type"]: p for p in o.points("gen_ai.client.token.usage")}
    assert tokens["input"].sum > 0 and tokens["output"].count == 1
    (duration,) = o.points("gen_ai.client.operation.duration")
    assert duration.count == 1


async def test_request_attributes_are_kept_per_host_not_per_url(otel: Otel) -> None:
    from geppetto.events import EventFinal, EventMetadata, EventStart, publish
    from geppetto.providers import _http

    meta = EventMetadata(inference_id="inf-2", provider="openai", model="m")
    for n in range(3):  # paths that carry ids, as a chain's validation reads do
        publish(EventStart(meta))
        for hook in _http.REQUEST_HOOKS:
            hook(f"https://api.example.test:8443/v1/responses/resp_{n}/input_items", {}, 10 + n)
        publish(EventFinal(meta))
    spans = otel.finished()
    assert [(s.attributes["server.port"], s.attributes["http.request.body.size"]) for s in spans] == [
        (8443, 10),
        (8443, 11),
        (8443, 12),
    ]
    assert {s.attributes["server.address"] for s in spans} == {"api.example.test"}
    assert len(otel.inst._server_attributes) == 1


async def test_events_of_a_subclass_go_where_their_base_goes(otel: Otel) -> None:
    from geppetto.events import EventMetadata, EventToolCallStarted, EventToolResult, publish

    class Started(EventToolCallStarted):
        pass

    meta = EventMetadata(inference_id="inf-1")
    publish(Started(meta, call_id="c1", name="lookup"))
    publish(EventToolResult(meta, call_id="c1", name="lookup", result="ok"))
    (span,) = otel.finished()
    assert span.name == "execute_tool lookup" and span.end_time >= span.start_time
    assert span.attributes["gen_ai.tool.type"] == "function"  # started by the subclass event, not made at the end


class _Receiver(http.server.BaseHTTPRequestHandler):
    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        type(self).bodies.append(self.rfile.read(length))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


async def test_spans_reach_an_otlp_http_receiver(geppetto_sim: Simulator) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the OTLP/HTTP exporter is not installed")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    server = http.server.HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{server.server_port}/v1/traces", timeout=5))
    )
    inst = instrument(provider)
    try:
        async with geppetto_sim.engine("openai-responses", retry=FAST) as engine:
            await Session(engine).run("Hello")
    finally:
        inst.uninstrument()
        provider.shutdown()
        server.shutdown()
    names = []
    for body in _Receiver.bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                assert ss.scope.name == "geppetto"
                names.extend(span.name for span in ss.spans)
    assert sorted(names) == ["chat sim-1", "invoke_agent geppetto"]


def test_import_geppetto_loads_no_opentelemetry() -> None:
    res = subprocess.run(
        [sys.executable, "-c", "import sys, geppetto; print(any(m.startswith('opentelemetry') for m in sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert res.stdout.strip() == "False"


def test_instrument_without_the_extra_names_it(
    without: Callable[[set[str], str], subprocess.CompletedProcess[str]],
) -> None:
    res = without({"opentelemetry"}, "from geppetto.observability import instrument; instrument()")
    assert res.returncode == 1
    assert res.stderr.strip().splitlines()[-1] == (
        "ImportError: geppetto.observability needs the 'otel' extra (opentelemetry is not installed): "
        "make setup (in this clone of the repository; elsewhere: pip install 'geppetto[otel]')"
    )


def test_an_incoming_traceparent_in_geppetto_serve_becomes_the_parent(
    otel: Otel, geppetto_sim: Simulator, tmp_path: Path
) -> None:
    pytest.importorskip("ag_ui", reason="the server extra is not installed")
    import httpx

    from geppetto.profiles import Profile
    from geppetto.server import create_app

    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    profile = Profile(name="t", provider="openai-responses", model="sim-1", base_url=geppetto_sim.openai_url)
    app = create_app(profile.with_overrides(simulator=True), store=str(tmp_path / "s.db"))
    from geppetto._asgi import ThreadedServer

    server = ThreadedServer(app, lifespan="on")
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            sid = client.post("/api/sessions", json={}).json()["id"]
            headers = {"traceparent": f"00-{trace_id}-{span_id}-01"}
            started = client.post(f"/api/sessions/{sid}/messages", json={"text": "Hello"}, headers=headers).json()
            with client.stream(
                "GET", f"/api/sessions/{sid}/events", params={"after": started["after"], "until": "finished"}
            ) as response:
                for _ in response.iter_lines():
                    pass
            untraced = client.post(f"/api/sessions/{sid}/messages", json={"text": "Again"}).json()
            with client.stream(
                "GET", f"/api/sessions/{sid}/events", params={"after": untraced["after"], "until": "finished"}
            ) as response:
                for _ in response.iter_lines():
                    pass
    finally:
        server.stop()
    runs = [s for s in otel.finished() if s.name == "invoke_agent geppetto"]
    assert len(runs) == 2
    traced = next(s for s in runs if s.attributes["geppetto.inference.id"] == started["inference_id"])
    assert traced.parent is not None and traced.parent.is_remote
    assert format(traced.context.trace_id, "032x") == trace_id
    assert format(traced.parent.span_id, "016x") == span_id
    other = next(s for s in runs if s.attributes["geppetto.inference.id"] == untraced["inference_id"])
    assert other.parent is None, "without a traceparent the inference starts its own trace"


def test_the_chaining_gauge_follows_the_kill_switch(otel: Otel, monkeypatch: pytest.MonkeyPatch) -> None:
    (point,) = otel.points("geppetto.responses.chaining_enabled")
    assert point.value == 1
    monkeypatch.setenv("GEPPETTO_CHAINING", "off")
    (point,) = otel.points("geppetto.responses.chaining_enabled")
    assert point.value == 0


def test_requests_retried_with_an_unknown_outcome_are_counted(otel: Otel) -> None:
    from geppetto.providers._landed import retried_unknown

    retried_unknown("anthropic", "POST http://sim.test/v1/messages", "connection reset by peer")
    (point,) = [
        p for p in otel.points("geppetto.requests.retried_unknown_outcome") if p.attributes == {"provider": "anthropic"}
    ]
    assert point.value == 1
