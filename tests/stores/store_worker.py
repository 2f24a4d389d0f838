"""A separate process that talks to a session in a store, for the resume and SIGKILL tests.

    python store_worker.py STORE SIM_OPENAI_URL SESSION_ID

Reads prompts from stdin, one per line. For each it continues SESSION_ID from STORE when the store holds
it (else starts it), runs one inference with a chained ResponsesEngine against the simulator (events
recorded), and prints ``done SEQ TURN_ID`` once the snapshot is saved.
"""

from __future__ import annotations

import asyncio
import sys

from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.session import Session
from geppetto.session.stores import open_store


async def main(target: str, base_url: str, session_id: str) -> None:
    store = open_store(target)
    engine = ResponsesEngine("sim-1", api_key="sk-test", base_url=base_url)
    if session_id in await store.list_sessions():
        session = await Session.restore(engine, store, session_id, record_events=True)
    else:
        session = Session(engine, store=store, session_id=session_id, record_events=True)
    for line in sys.stdin:
        out = await session.run(line.strip())
        print("done", len(session.history), out.id, flush=True)
    store.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
