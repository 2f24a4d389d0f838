"""Client CPU per model step with OpenTelemetry tracing on, off, and not installed (issue 19).

A session runs a 5-step tool loop (ResponsesEngine, chained mode) against the scripted simulator in a
separate process. "traces": `geppetto.observability.instrument()` with the OTel SDK's tracer provider and
the span processor docs/observability.md sets up (a `BatchSpanProcessor`) handing every span to an exporter
that drops it, and the global meter provider, never set (what a traces-only setup has); "traces+metrics":
the same and an SDK meter provider with an in-memory reader, so metric points are really aggregated;
"traces, 1 in 10 sampled": traces with the SDK's `ParentBased(TraceIdRatioBased(0.1))` sampler (one session
run in ten, at random, keeps its spans), the usual way to bound tracing's cost; "geppetto alone":
instrumented with a tracer whose spans say they record and do nothing (geppetto's own share of "traces",
without the SDK's); "off": installed, not instrumented; "not installed": every `opentelemetry` import
fails, so geppetto runs as on a machine without the extra.

Each mode runs in processes of its own (one mode's spans, queues and export threads never weigh on
another's rounds; four per mode, taking its rounds in turn, since one process's memory layout moves its
speed by a percent or two), and the parent runs the rounds one at a time, every mode in turn, so the
machine's drift falls on every mode alike. CPU is time.process_time of the mode's process (its threads
included, so the batch processor's export thread counts); medians of the rounds.

Run: `.venv/bin/python bench/otel.py [ROUNDS]` (default 30; ``--tiny``: one process per mode and two
sessions a round, the smoke test).

`--peers` (run with the benchmark venv, `sh bench/setup.sh`: `bench/.venv/bin/python bench/otel.py --peers`)
adds pydantic-ai on the same loop (an Agent with OpenAIResponsesModel, as in bench/overhead.py) without
instrumentation and with its own OpenTelemetry instrumentation on the same tracer provider: "content off"
(`include_content=False`, what geppetto records by default) and its defaults (prompts and answers on its
spans), so the cost of tracing is seen beside a peer's, in percent of each one's step and in microseconds.

`--instructions [N]` counts the client's instructions instead (valgrind's callgrind: the same count
whatever else the machine does, where the CPU time above moves by tens of percent between runs on a shared
machine): the same loop against the same simulator process, N sessions (default 40) minus none, per step.
It adds "no-op providers" (instrumented, with the API's no-op tracer and meter providers, whose spans say
they do not record, so geppetto builds no attributes).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import (
    API_KEY,
    PROMPT,
    callgrind_instructions,
    machine,
    median,
    pydantic_ai_loop,
    simulator_process,
    table,
    weather,
)

STEPS = 5
SESSIONS_PER_ROUND = 20
PROCESSES_PER_MODE = 4
if "--tiny" in sys.argv:  # the smoke test (tests/bench): one process per mode, two sessions a round
    os.environ["GEPPETTO_BENCH_TINY"] = "1"  # the workers are started without the flag
if os.environ.get("GEPPETTO_BENCH_TINY") == "1":
    SESSIONS_PER_ROUND, PROCESSES_PER_MODE = 2, 1
MODES = ("off", "traces", "traces+metrics", "traces, 1 in 10 sampled", "geppetto alone")
PEER_MODES = ("pydantic-ai off", "pydantic-ai traces, content off", "pydantic-ai traces, its defaults")


def _sdk_tracer_provider(sampled: bool = False) -> Any:
    """The OTel SDK's tracer provider as docs/observability.md sets it up (a `BatchSpanProcessor`), handing
    every span to an exporter that drops it."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.1)) if sampled else None)
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    return provider


def _instrumentation(mode: str) -> Any:
    """A function that installs the instrumentation of ``mode`` and returns its handle (None for off)."""
    if mode in ("off", "not installed"):
        return lambda: None
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from geppetto.observability import instrument

    if mode == "no-op providers":
        tracer_provider: Any = trace.NoOpTracerProvider()
    elif mode == "geppetto alone":
        tracer_provider = _null_tracer_provider()
    else:
        tracer_provider = _sdk_tracer_provider(sampled=mode == "traces, 1 in 10 sampled")
    if mode == "traces+metrics":
        meter_provider: Any = MeterProvider(metric_readers=[InMemoryMetricReader()])
    elif mode in ("no-op providers", "geppetto alone"):
        meter_provider = metrics.NoOpMeterProvider()
    else:
        meter_provider = None  # the global one, not set: what a traces-only setup has
    return lambda: instrument(tracer_provider, meter_provider)


def _null_tracer_provider() -> Any:
    """A tracer provider whose spans say they record and keep nothing: geppetto builds every attribute and
    makes every call it makes with the SDK, and the SDK's own work is left out ("geppetto alone")."""
    from opentelemetry import trace
    from opentelemetry.trace import SpanContext, TraceFlags

    context = SpanContext(trace_id=1, span_id=1, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))

    class Span(trace.Span):
        def get_span_context(self) -> SpanContext:
            return context

        def is_recording(self) -> bool:
            return True

        def set_attributes(self, attributes: Any) -> None: ...
        def set_attribute(self, key: str, value: Any) -> None: ...
        def add_event(self, *args: Any, **kwargs: Any) -> None: ...
        def add_link(self, *args: Any, **kwargs: Any) -> None: ...
        def update_name(self, name: str) -> None: ...
        def set_status(self, *args: Any, **kwargs: Any) -> None: ...
        def record_exception(self, *args: Any, **kwargs: Any) -> None: ...
        def end(self, end_time: int | None = None) -> None: ...

    class Tracer(trace.Tracer):
        def start_span(self, name: str, *args: Any, **kwargs: Any) -> Span:
            return Span()

        def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    class Provider(trace.TracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> Tracer:
            return Tracer()

    return Provider()


def _session_loop(engine: Any) -> Any:
    """A coroutine function running one tool-loop session on ``engine``; returns its model steps."""
    import geppetto as gp

    @gp.tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        return weather(city)

    registry = gp.ToolRegistry([get_weather])

    async def one() -> int:
        turn = await gp.Session(engine, tools=registry).run(PROMPT)
        return sum(1 for b in turn.blocks if b.kind in (gp.BlockKind.LLM_TEXT, gp.BlockKind.TOOL_CALL))

    return one


def _pydantic_ai_loop(url: str, mode: str) -> Any:
    """pydantic-ai's run of the same loop, instrumented as ``mode`` says (on the same tracer provider as
    geppetto's "traces", the global meter provider)."""
    from pydantic_ai import InstrumentationSettings
    from pydantic_ai.capabilities import Instrumentation

    capabilities: list[Any] = []
    if mode != PEER_MODES[0]:
        settings = InstrumentationSettings(
            tracer_provider=_sdk_tracer_provider(), include_content=mode.endswith("its defaults")
        )
        capabilities.append(Instrumentation(settings=settings))
    return pydantic_ai_loop(url, capabilities=capabilities)


def _loop(url: str, mode: str) -> tuple[Any, Any]:
    """A coroutine function running the loop once as ``mode`` says (geppetto or pydantic-ai, instrumented or
    not) and returning its model steps, checked; and the geppetto engine to close after (or None)."""
    engine = None
    if mode in PEER_MODES:
        run = _pydantic_ai_loop(url, mode)
    else:
        from geppetto.providers.openai_responses import ResponsesEngine

        engine = ResponsesEngine("sim-1", api_key=API_KEY, base_url=url, mode="chained")
        _instrumentation(mode)()
        run = _session_loop(engine)

    async def checked() -> int:
        steps: int = await run()
        assert steps == STEPS, f"expected a {STEPS}-step loop, got {steps} steps"
        return steps

    return checked, engine


async def _worker(url: str, mode: str) -> None:
    """One mode's process: instrument, warm up, then run a round for each line the parent sends and print
    its CPU per step."""
    session, engine = _loop(url, mode)

    async def one_round() -> float:
        steps = 0
        start_cpu = time.process_time()
        for _ in range(SESSIONS_PER_ROUND):
            steps += await session()
        return (time.process_time() - start_cpu) / steps

    await one_round()  # warm up: connections, caches
    print("ready", flush=True)
    for _ in sys.stdin:
        gc.collect()
        print(await one_round(), flush=True)
    if engine is not None:
        await engine.aclose()


def _rounds(url: str, rounds: int, modes: list[str]) -> dict[str, list[float]]:
    """Each mode in processes of its own (so one mode's spans, queues and threads never weigh on another's
    rounds), PROCESSES_PER_MODE of them taking the mode's rounds in turn (a process's memory layout, hash
    seed included, moves its speed by a percent or two); the parent runs one round at a time, every mode
    in turn, so the machine's drift falls on all."""
    out: dict[str, list[float]] = {m: [] for m in modes}
    with _without_opentelemetry() as blocked, contextlib.ExitStack() as stack:
        workers: dict[str, list[subprocess.Popen[str]]] = {m: [] for m in modes}
        for mode in modes:
            for _ in range(PROCESSES_PER_MODE):
                proc = subprocess.Popen(
                    [sys.executable, __file__, "--worker", url, mode],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    env=blocked if mode == "not installed" else None,
                )
                stack.callback(proc.wait, 30)
                stack.callback(proc.stdin.close)  # type: ignore[union-attr]
                workers[mode].append(proc)
        for mode, procs in workers.items():
            for proc in procs:
                if proc.stdout.readline().strip() != "ready":  # type: ignore[union-attr]
                    raise RuntimeError(f"a {mode!r} worker did not start (exit {proc.wait()})")
        for i in range(rounds):
            for mode, procs in workers.items():
                proc = procs[i % len(procs)]
                proc.stdin.write("go\n")  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
                out[mode].append(float(proc.stdout.readline()))  # type: ignore[union-attr]
    return out


@contextlib.contextmanager
def _without_opentelemetry() -> Iterator[dict[str, str]]:
    """An environment for a child process in which every ``opentelemetry`` import fails."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "sitecustomize.py").write_text(
            "import sys\n"
            "class _Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'opentelemetry' or name.startswith('opentelemetry.'):\n"
            "            raise ImportError(name)\n"
            "sys.meta_path.insert(0, _Block())\n"
        )
        yield {**os.environ, "PYTHONPATH": os.pathsep.join([tmp, str(Path(__file__).parent)])}


# -- instructions ---------------------------------------------------------------------------------


async def _counted_runs(url: str, mode: str, n: int) -> None:
    session, engine = _loop(url, mode)
    for _ in range(3 + n):  # three to warm up, counted in every run alike
        await session()
    if engine is not None:
        await engine.aclose()


def count_instructions(n: int, peers: bool) -> None:
    modes = ["not installed", "off", "no-op providers", *MODES[1:], *(PEER_MODES if peers else ())]
    with simulator_process(STEPS) as url, _without_opentelemetry() as blocked:

        def count(mode: str, runs: int) -> int:
            env = blocked if mode == "not installed" else None
            return callgrind_instructions(sys.executable, __file__, "--count", url, mode, str(runs), env=env)

        per_step = {mode: (count(mode, n) - count(mode, 0)) / (n * STEPS) for mode in modes}
    print(f"client instructions per model step, {STEPS}-step tool loop (callgrind, {n} sessions)")
    rows = [[mode, f"{c / 1e3:,.0f}k", f"{c / per_step[_off_of(mode)] - 1:+.1%}"] for mode, c in per_step.items()]
    print(table(["instrumentation", "instructions per step", "vs its off"], rows))


def _off_of(mode: str) -> str:
    """The uninstrumented mode ``mode`` is compared with: geppetto's or the peer's."""
    return PEER_MODES[0] if mode in PEER_MODES else "off"


def _peers(args: list[str]) -> bool:
    """Whether ``--peers`` was asked for (and pydantic-ai is there to run)."""
    if "--peers" not in args:
        return False
    try:
        import pydantic_ai  # noqa: F401
    except ImportError:
        sys.exit("--peers needs pydantic-ai: run with the benchmark venv (sh bench/setup.sh), bench/.venv/bin/python")
    return True


def main() -> None:
    if sys.argv[1:2] == ["--count"]:
        asyncio.run(_counted_runs(sys.argv[2], sys.argv[3], int(sys.argv[4])))
        return
    args = [a for a in sys.argv[1:] if a not in ("--peers", "--tiny")]
    if args[:1] == ["--instructions"]:
        count_instructions(int(args[1]) if len(args) > 1 else 40, _peers(sys.argv))
        return
    if sys.argv[1:2] == ["--worker"]:
        asyncio.run(_worker(sys.argv[2], sys.argv[3]))
        return
    peers = _peers(sys.argv)
    rounds = int(args[0]) if args else 30
    modes = [*MODES, "not installed", *(PEER_MODES if peers else ())]
    print(machine())
    with simulator_process(STEPS) as url:
        measured = _rounds(url, rounds, modes)
    base = median(measured["not installed"])
    off = median(measured["off"])
    rows = [
        [
            mode,
            f"{median(v) * 1e6:.0f} us",
            f"{median(v) / median(measured[_off_of(mode)]) - 1:+.1%}",
            f"{median(v) / base:.3f}x",
        ]
        for mode, v in measured.items()
    ]
    print(f"client CPU per model step, {STEPS}-step tool loop, {SESSIONS_PER_ROUND} sessions x {rounds} rounds")
    print(table(["instrumentation", "CPU per step", "vs its off", "vs not installed"], rows))
    traces = median(measured["traces"]) / off - 1
    both = median(measured["traces+metrics"]) / off - 1
    sampled = median(measured["traces, 1 in 10 sampled"]) / off - 1
    alone = median(measured["geppetto alone"]) / off - 1
    print(
        f"SUMMARY tracing on adds {traces:+.1%} client CPU per step over off (target < 10%): geppetto's calls "
        f"{alone:+.1%}, the SDK's work the rest; tracing and metrics {both:+.1%}, tracing 1 in 10 sampled "
        f"{sampled:+.1%}; off vs not installed {off / base - 1:+.1%}"
    )
    if peers:
        ours = median(measured["traces"]) - off
        peer_off = median(measured[PEER_MODES[0]])
        for mode in PEER_MODES[1:]:
            added = median(measured[mode]) - peer_off
            print(
                f"SUMMARY {mode} adds {added / peer_off:+.1%} to its CPU per step ({added * 1e6:.0f} us); "
                f"geppetto's traces add {traces:+.1%} ({ours * 1e6:.0f} us)"
            )


if __name__ == "__main__":
    main()
