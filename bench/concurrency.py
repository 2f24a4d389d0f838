"""1,000 concurrent sessions, each a 3-step tool loop, in one process against the simulator (issue 8).

The simulator runs in a child process on loopback. Every session is a `geppetto.Session` over its own
ResponsesEngine (chained mode) with a tool registry; all engines share one geppetto HttpTransport with
`max_in_flight=CONNECTIONS`, so at most CONNECTIONS requests are open and the rest wait in the
transport, in order, before they reach the httpx pool. Wave 1 measures completed steps/s, p50/p99
step latency (around the engine call, so the wait for a place is included), errors and peak RSS.
Waves 2 to 4 run under tracemalloc: the peak traced memory per concurrent session, and the memory still held after each wave; growth is the
change from wave 2 to wave 4 per completed session (~0 when nothing is kept per session). Before each
reading the process-wide Responses metrics are reset: they keep the latest 10,000 samples per
histogram, a bounded buffer that would otherwise read as growth until it is full (~10,000 requests).
Run: `bench/.venv/bin/python bench/concurrency.py [SESSIONS]`.
"""

from __future__ import annotations

import asyncio
import gc
import resource
import sys
import time
import tracemalloc
from collections import Counter
from typing import Any

from _common import API_KEY, PROMPT, machine, percentile, simulator_process, table, weather

import geppetto as gp
from geppetto.providers import HttpTransport
from geppetto.providers.openai_responses import ResponsesEngine, metrics

STEPS = 3
CONNECTIONS = 32
TRACED_WAVES = 3


@gp.tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return weather(city)


class TimedEngine:
    """Delegates to an engine and records each step's latency (the wait for a transport place included)."""

    def __init__(self, engine: Any, latencies: list[float]) -> None:
        self.engine, self.latencies = engine, latencies

    async def run_inference(self, turn: gp.Turn) -> gp.Turn:
        t0 = time.perf_counter()
        out: gp.Turn = await self.engine.run_inference(turn)
        self.latencies.append(time.perf_counter() - t0)
        return out


async def wave(url: str, http: HttpTransport, sessions: int) -> tuple[float, list[float], Counter[str]]:
    """Run `sessions` sessions at once; return (wall s, step latencies, errors by type)."""
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    registry = gp.ToolRegistry([get_weather])

    async def one() -> None:
        engine = ResponsesEngine("sim-1", api_key=API_KEY, base_url=url, http=http)
        session = gp.Session(TimedEngine(engine, latencies), tools=registry)
        try:
            turn = await session.run(PROMPT)
            calls = sum(1 for b in turn.blocks if b.kind is gp.BlockKind.TOOL_CALL)
            if calls != STEPS - 1:
                errors[f"{calls} tool calls instead of {STEPS - 1}"] += 1
        except Exception as exc:  # counted and reported, the benchmark goes on
            errors[type(exc).__name__] += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(sessions)))
    return time.perf_counter() - t0, latencies, errors


async def main(sessions: int) -> int:
    with simulator_process(STEPS) as url:
        async with HttpTransport(url, provider="openai", max_in_flight=CONNECTIONS, timeout=120) as http:
            await wave(url, http, 10)  # warm-up
            wall, lat, errors = await wave(url, http, sessions)
            peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            gc.collect()
            tracemalloc.start()
            held = []
            peaks = []
            all_errors = Counter(errors)
            for _ in range(TRACED_WAVES):
                metrics.reset()
                gc.collect()
                tracemalloc.reset_peak()
                before, _ = tracemalloc.get_traced_memory()
                _, _, more = await wave(url, http, sessions)
                all_errors.update(more)
                _, peak = tracemalloc.get_traced_memory()
                metrics.reset()
                gc.collect()
                after, _ = tracemalloc.get_traced_memory()
                held.append(after)
                peaks.append(peak - before)
            tracemalloc.stop()
    steps = len(lat)
    growth = (held[-1] - held[0]) / (sessions * (TRACED_WAVES - 1))
    waves = 1 + TRACED_WAVES
    print(f"# concurrency: {sessions:,} sessions x {STEPS}-step tool loop, max_in_flight {CONNECTIONS}; {machine()}")
    rows = [
        ["completed steps/s", steps / wall],
        ["sessions/s", sessions / wall],
        ["p50 step latency ms", percentile(lat, 0.50) * 1e3],
        ["p99 step latency ms", percentile(lat, 0.99) * 1e3],
        ["wave wall time s", wall],
        ["peak RSS MB (process)", peak_rss_mb],
        ["peak traced KB per concurrent session", max(peaks) / sessions / 1024],
        ["memory held after waves 2, 3, 4 KB", " / ".join(f"{h / 1024:,.0f}" for h in held)],
        ["growth per completed session, waves 2 to 4 (bytes)", growth],
        [f"errors ({waves} waves, {waves * sessions:,} sessions)", sum(all_errors.values())],
    ]
    print(table(["metric", "value"], rows))
    for kind, n in all_errors.items():
        print(f"error {kind}: {n}")
    print(
        f"SUMMARY {steps / wall:,.0f} steps/s, p50 {percentile(lat, 0.5) * 1e3:.1f} ms, p99 {percentile(lat, 0.99) * 1e3:.1f}"
        f" ms, {sum(all_errors.values())} errors (target 0), {growth:+.0f} B/session growth (target ~0)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)))
