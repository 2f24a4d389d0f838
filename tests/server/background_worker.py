"""``geppetto serve``'s app in a child process whose engine reads background responses from the simulator at
``SIM_URL`` (sweeping every 0.2 s, so a dead worker's inference is picked up quickly): ``python
background_worker.py PORT STORE BUS SIM_URL [interactions]`` (``interactions``: background interactions of the
Gemini Interactions engine, SIM_URL then being the simulator's root)."""

from __future__ import annotations

import sys
from typing import Any

import uvicorn

from geppetto.providers.gemini import InteractionsEngine
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.server import create_app


def main() -> None:
    port, store, bus, sim_url = sys.argv[1:5]
    kind = ResponsesEngine if sys.argv[5:] != ["interactions"] else InteractionsEngine

    def engine_for(settings: dict[str, Any]) -> Any:
        return kind("sim-1", api_key="sk-sim", base_url=sim_url, background=True, poll_interval=0.05)

    app = create_app(store=store, bus=bus, engine_for=engine_for, sweep_interval=0.2)
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")


if __name__ == "__main__":
    main()
