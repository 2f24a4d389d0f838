"""Client CPU per model step with OpenTelemetry tracing on, off, and not installed (issue 19).

A session runs a 5-step tool loop (ResponsesEngine, chained mode) against the scripted simulator in a
separate process. "on": `geppetto.observability.instrument()` with the OTel SDK (a tracer provider whose
span processor hands every span to an exporter that drops it, and a meter provider with an in-memory
reader), so spans and metric points are really made; "off": the same process with instrumentation
removed; rounds alternate on and off. "not installed": a child process in which every `opentelemetry`
import fails, so geppetto runs as on a machine without the extra. CPU is time.process_time of the client
process only; medians of the rounds.

Run: `.venv/bin/python bench/otel.py [ROUNDS]` (default 30).

`--instructions [N]` counts instructions instead (valgrind's callgrind, the same count whatever else the
machine does): a one-request `Session.run` on the Responses engine (stateless mode) replaying a recorded
simulator reply through `httpx.MockTransport`, N runs (default 100) minus none, with tracing off, tracing
on (no meter provider), and tracing and metrics on.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import API_KEY, PROMPT, callgrind_instructions, machine, median, simulator_process, table, weather

STEPS = 5
SESSIONS_PER_ROUND = 20


async def _rounds(url: str, rounds: int, modes: list[str]) -> dict[str, list[float]]:
    import geppetto as gp
    from geppetto.providers.openai_responses import ResponsesEngine

    @gp.tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        return weather(city)

    registry = gp.ToolRegistry([get_weather])
    engine = ResponsesEngine("sim-1", api_key=API_KEY, base_url=url, mode="chained")
    instrument: Any = None
    if "on" in modes:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

        from geppetto.observability import instrument as start

        class Drop(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(Drop()))
        meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])

        def instrument() -> Any:
            return start(tracer_provider, meter_provider)

    async def one_round() -> float:
        steps = 0
        start_cpu = time.process_time()
        for _ in range(SESSIONS_PER_ROUND):
            session = gp.Session(engine, tools=registry)
            turn = await session.run(PROMPT)
            steps += sum(1 for b in turn.blocks if b.kind is gp.BlockKind.LLM_TEXT) + sum(
                1 for b in turn.blocks if b.kind is gp.BlockKind.TOOL_CALL
            )
        return (time.process_time() - start_cpu) / steps

    await one_round()  # warm up: connections, caches
    out: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(rounds):
        for mode in modes:
            handle = instrument() if mode == "on" else None
            gc.collect()
            out[mode].append(await one_round())
            if handle is not None:
                handle.uninstrument()
    await engine.aclose()
    return out


def _child(url: str, rounds: int) -> None:
    result = asyncio.run(_rounds(url, rounds, ["not installed"]))
    print(json.dumps(result))


def _not_installed(url: str, rounds: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "sitecustomize.py").write_text(
            "import sys\n"
            "class _Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'opentelemetry' or name.startswith('opentelemetry.'):\n"
            "            raise ImportError(name)\n"
            "sys.meta_path.insert(0, _Block())\n"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([tmp, str(Path(__file__).parent)])}
        res = subprocess.run(
            [sys.executable, __file__, "--child", url, str(rounds)], capture_output=True, text=True, env=env, check=True
        )
    return list(json.loads(res.stdout.strip().splitlines()[-1])["not installed"])


async def _one_request_runs(reply: str, mode: str, n: int) -> None:
    import base64

    import httpx

    import geppetto as gp
    from geppetto.providers.openai_responses import ResponsesEngine

    status, headers, encoded = json.loads(Path(reply).read_text())  # noqa: ASYNC240 - setup only
    body = base64.b64decode(encoded)
    if mode != "off":
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

        from geppetto.observability import instrument

        class Drop(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(Drop()))
        meters = MeterProvider(metric_readers=[InMemoryMetricReader()]) if mode == "traces+metrics" else None
        instrument(tracer_provider, meters)
    transport = httpx.MockTransport(lambda request: httpx.Response(status, headers=headers, content=body))
    client = httpx.AsyncClient(transport=transport)
    engine = ResponsesEngine("sim-1", api_key=API_KEY, base_url="http://127.0.0.1:9/v1", http=client, mode="stateless")
    for _ in range(3 + n):
        await gp.Session(engine).run("Hello")


def _count(reply: str, mode: str, n: int) -> int:
    return callgrind_instructions(sys.executable, __file__, "--runs", reply, mode, str(n))


def count_instructions(n: int) -> None:
    import base64

    import httpx

    from geppetto.simulator import serve

    with serve() as sim, tempfile.TemporaryDirectory() as tmp:
        reply = httpx.post(
            sim.openai_url + "/responses",
            json={"model": "sim-1", "input": "Hello", "stream": True},
            headers={"authorization": f"Bearer {API_KEY}"},
        )
        path = f"{tmp}/reply.json"
        Path(path).write_text(
            json.dumps([reply.status_code, list(reply.headers.items()), base64.b64encode(reply.content).decode()])
        )
        counts = {
            mode: (_count(path, mode, n) - _count(path, mode, 0)) / n for mode in ("off", "traces", "traces+metrics")
        }
    print(f"instructions per one-request Session.run (callgrind, {n} runs)")
    rows = [[mode, f"{c / 1e3:,.0f}k", f"{c / counts['off'] - 1:+.1%}"] for mode, c in counts.items()]
    print(table(["instrumentation", "instructions", "vs off"], rows))


def main() -> None:
    if sys.argv[1:2] == ["--runs"]:
        asyncio.run(_one_request_runs(sys.argv[2], sys.argv[3], int(sys.argv[4])))
        return
    if sys.argv[1:2] == ["--instructions"]:
        count_instructions(int(sys.argv[2]) if len(sys.argv) > 2 else 100)
        return
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], int(sys.argv[3]))
        return
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    print(machine())
    with simulator_process(STEPS) as url:
        measured = asyncio.run(_rounds(url, rounds, ["off", "on"]))
        measured["not installed"] = _not_installed(url, rounds)
    base = median(measured["not installed"])
    rows = [[mode, f"{median(v) * 1e6:.0f} us", f"{median(v) / base:.3f}x"] for mode, v in measured.items()]
    print(f"client CPU per model step, {STEPS}-step tool loop, {SESSIONS_PER_ROUND} sessions x {rounds} rounds")
    print(table(["tracing", "CPU per step", "vs not installed"], rows))
    on = median(measured["on"]) / median(measured["off"]) - 1
    print(
        f"SUMMARY tracing on adds {on:+.1%} client CPU per step over off (target < 10%); off vs not installed "
        f"{median(measured['off']) / base - 1:+.1%}"
    )


if __name__ == "__main__":
    main()
