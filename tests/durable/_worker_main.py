"""A worker process for the kill tests: ``python _worker_main.py ADDRESS QUEUE OPENAI_URL RUNS_FILE``.

Its tools append a line to RUNS_FILE each time they run (so runs are counted across processes);
``get_weather`` then waits ``GEPPETTO_TEST_TOOL_DELAY`` seconds (0 by default) before it returns."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import geppetto as gp
from geppetto.durable.temporal import DATA_CONVERTER, worker
from geppetto.providers.openai_responses import ResponsesEngine

ADDRESS, QUEUE, OPENAI_URL, RUNS = sys.argv[1:5]


def _ran(what: str) -> None:
    with open(RUNS, "a", encoding="utf-8") as f:
        f.write(what + "\n")


@gp.tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    _ran(f"get_weather {city}")
    time.sleep(float(os.environ.get("GEPPETTO_TEST_TOOL_DELAY", "0")))
    return f"{city}: 18°C, light rain"


@gp.tool(requires_approval=True)
def book_table(restaurant: str) -> str:
    """Reserve at a restaurant."""
    _ran(f"book_table {restaurant}")
    return f"booked at {restaurant}"


async def main() -> None:
    from temporalio.client import Client

    client = await Client.connect(ADDRESS, data_converter=DATA_CONVERTER)
    engines = {"sim": lambda: ResponsesEngine("sim-1", api_key="sk-sim", base_url=OPENAI_URL)}
    w = worker(client, task_queue=QUEUE, engines=engines, tools=[get_weather, book_table])
    print("ready", flush=True)
    await w.run()


if __name__ == "__main__":
    asyncio.run(main())
