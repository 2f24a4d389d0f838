"""``geppetto serve``'s app in a child process with a Responses engine on the simulator at ``SIM_URL`` (reading
background responses, as ``background_worker.py``, unless ``plain``) and one tool, ``weather``, that appends a line to the file ``RUNS`` each time it runs. Every request after the
process's first waits until the file ``HOLD`` exists, so a test can kill the worker after a tool returned and
before the next request: ``python journal_worker.py PORT STORE BUS SIM_URL RUNS HOLD [plain]`` (``plain``: an
engine that streams its answers rather than reading background responses)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import uvicorn

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.server import create_app

REQUESTS = [0]  # this process's requests so far


class Held:
    """``engine``, holding each request after the process's first until the file ``hold`` exists."""

    def __init__(self, engine: ResponsesEngine, hold: Path) -> None:
        self.engine, self.hold = engine, hold
        self.provider = engine.provider

    async def run_inference(self, turn: gp.Turn) -> gp.Turn:
        REQUESTS[0] += 1
        while REQUESTS[0] > 1 and not self.hold.exists():  # noqa: ASYNC110 - the file comes from another process
            await asyncio.sleep(0.02)
        return await self.engine.run_inference(turn)


def main() -> None:
    port, store, bus, sim_url, runs, hold = sys.argv[1:7]
    background = sys.argv[7:] != ["plain"]

    @gp.tool
    def weather(city: str) -> str:
        """The weather in a city."""
        with open(runs, "a") as f:
            f.write(f"{city}\n")
        return f"sunny in {city}"

    def engine_for(settings: dict[str, Any]) -> Any:
        engine = ResponsesEngine("sim-1", api_key="sk-sim", base_url=sim_url, background=background, poll_interval=0.05)
        return Held(engine, Path(hold))

    app = create_app(store=store, bus=bus, engine_for=engine_for, tools=gp.ToolRegistry([weather]), sweep_interval=0.2)
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")


if __name__ == "__main__":
    main()
