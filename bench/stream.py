"""Stream parsing throughput: a recorded Responses SSE stream of 10,000 text deltas (issue 8).

The stream is recorded once from the simulator (a 10,000-word reply, one `response.output_text.delta`
per word), then replayed from memory through an `httpx.MockTransport` to (a) geppetto's ResponsesEngine
(SSE parsing, stream reduction, one EventTextDelta published per delta to a null sink, the final Turn)
and (b) the openai SDK's stream iterator (`responses.create(stream=True)`, each event handed to a null
sink). Interleaved rounds, median deltas per second.
Run: `bench/.venv/bin/python bench/stream.py [ROUNDS]`.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from _common import API_KEY, machine, median, table

DELTAS = 10_000


def record() -> bytes:
    """The raw SSE bytes of a 10,000-delta text reply, as the simulator sends them."""
    from geppetto.simulator import Reply, serve

    with serve() as sim:
        sim.queue(Reply(text=" ".join(f"word{i}" for i in range(DELTAS))))
        body = {"model": "sim-1", "input": "Say ten thousand words.", "stream": True}
        resp = httpx.post(f"{sim.openai_url}/responses", json=body, headers={"authorization": f"Bearer {API_KEY}"})
        resp.raise_for_status()
    count = resp.content.count(b'"type":"response.output_text.delta"')
    if count != DELTAS:
        raise RuntimeError(f"recorded {count} text deltas, expected {DELTAS}")
    return resp.content


def _client(data: bytes) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=data)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def make_geppetto(data: bytes) -> Callable[[], Awaitable[int]]:
    import geppetto as gp
    from geppetto.events import EventTextDelta, with_sinks
    from geppetto.providers.openai_responses import ResponsesEngine

    engine = ResponsesEngine("sim-1", api_key=API_KEY, base_url="http://sim.invalid/v1", http=_client(data))
    seen = [0]

    def sink(event: Any) -> None:
        if isinstance(event, EventTextDelta):
            seen[0] += 1

    async def run() -> int:
        seen[0] = 0
        turn = gp.Turn()
        turn.append(gp.Block.user("Say ten thousand words."))
        with with_sinks(sink):
            await engine.run_inference(turn)
        return seen[0]

    return run


def make_openai(data: bytes) -> Callable[[], Awaitable[int]]:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key=API_KEY, base_url="http://sim.invalid/v1", http_client=_client(data))
    seen = [0]

    def sink(event: Any) -> None:
        if event.type == "response.output_text.delta":
            seen[0] += 1

    async def run() -> int:
        seen[0] = 0
        stream = await client.responses.create(model="sim-1", input="Say ten thousand words.", stream=True)
        async for event in stream:
            sink(event)
        return seen[0]

    return run


async def main(rounds: int) -> int:
    data = record()
    drivers = {"geppetto ResponsesEngine": make_geppetto(data), "openai SDK stream iterator": make_openai(data)}
    rates: dict[str, list[float]] = {n: [] for n in drivers}
    cpu: dict[str, list[float]] = {n: [] for n in drivers}
    for name, run in drivers.items():
        if await run() != DELTAS:  # warm-up and check
            raise RuntimeError(f"{name} saw a different number of deltas than {DELTAS}")
    for _ in range(rounds):
        for name, run in drivers.items():
            c0, w0 = time.process_time(), time.perf_counter()
            await run()
            rates[name].append(DELTAS / (time.perf_counter() - w0))
            cpu[name].append((time.process_time() - c0) / DELTAS * 1e6)
    print(f"# stream: {DELTAS:,} text deltas, {len(data):,} bytes, {rounds} interleaved rounds; {machine()}")
    rows = [[n, median(rates[n]), median(cpu[n])] for n in drivers]
    print(table(["parser", "deltas/s", "CPU us/delta"], rows))
    g, o = median(rates["geppetto ResponsesEngine"]), median(rates["openai SDK stream iterator"])
    print(f"SUMMARY geppetto = {g / o:.2f}x the openai SDK's deltas/s (target >= 2)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)))
