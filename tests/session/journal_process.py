"""A process that runs a session with a tool against the simulator and is killed (SIGKILL, by itself) after
the tool returned and before the next request; or the process after it, which restores the session and goes
on with the interrupted inference. ``python journal_process.py first|second STORE SIM_URL SESSION RUNS``;
``second`` prints the output turn as JSON."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.session.stores import open_store
from geppetto.turns import dumps_json


class KilledOnSecondRequest:
    """``engine``, whose process is killed when the second request is about to be sent."""

    def __init__(self, engine: ResponsesEngine) -> None:
        self.engine, self.provider, self.requests = engine, engine.provider, 0

    async def run_inference(self, turn: gp.Turn) -> gp.Turn:
        self.requests += 1
        if self.requests == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return await self.engine.run_inference(turn)


async def main() -> None:
    mode, target, sim_url, session_id, runs = sys.argv[1:6]

    @gp.tool
    def weather(city: str) -> str:
        """The weather in a city."""
        with open(runs, "a") as f:
            f.write(f"{city}\n")
        return f"sunny in {city}"

    engine = ResponsesEngine("sim-1", api_key="sk-sim", base_url=sim_url)
    store = open_store(target)
    if mode == "first":
        killed = KilledOnSecondRequest(engine)
        if session_id in await store.list_sessions():
            session = await gp.Session.restore(killed, store, session_id, tools=[weather])
        else:
            session = gp.Session(killed, tools=[weather], store=store, session_id=session_id)
        await session.run("Weather in Paris?")
        raise SystemExit("not reached: the process is killed before the second request")
    session = await gp.Session.restore(engine, store, session_id, tools=[weather])
    print(session.interrupted or "")
    out = await session.resume()
    print(dumps_json(out))


if __name__ == "__main__":
    asyncio.run(main())
