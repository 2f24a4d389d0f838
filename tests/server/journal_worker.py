"""``geppetto serve``'s app in a child process with a background engine (as ``background_worker.py``) and one
tool, ``weather``, that appends a line to the file ``RUNS`` each time it runs, after waiting for the file
``GATE`` to exist (so a test can arm a fault first): ``python journal_worker.py PORT STORE BUS SIM_URL RUNS GATE``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import uvicorn

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.server import create_app


def main() -> None:
    port, store, bus, sim_url, runs, gate = sys.argv[1:7]

    @gp.tool
    def weather(city: str) -> str:
        """The weather in a city."""
        deadline = time.monotonic() + 30
        while not Path(gate).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        with open(runs, "a") as f:
            f.write(f"{city}\n")
        return f"sunny in {city}"

    def engine_for(settings: dict[str, Any]) -> Any:
        return ResponsesEngine("sim-1", api_key="sk-sim", base_url=sim_url, background=True, poll_interval=0.05)

    app = create_app(store=store, bus=bus, engine_for=engine_for, tools=gp.ToolRegistry([weather]), sweep_interval=0.2)
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")


if __name__ == "__main__":
    main()
