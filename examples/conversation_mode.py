"""Conversation mode: a server-side conversation object holds the context; each request sends only the
new blocks and names the conversation. Runs offline against the simulator.

    python examples/conversation_mode.py
"""

from __future__ import annotations

import asyncio

import geppetto as gp
from geppetto.events import TextPrinter
from geppetto.providers.openai_responses import ResponsesEngine, get_state
from geppetto.simulator import serve


async def converse(base_url: str) -> gp.Turn:
    engine = ResponsesEngine(model="sim-1", api_key="sk-sim", base_url=base_url, mode="conversation")
    session = gp.Session(engine, sinks=[TextPrinter()])
    for prompt in ("My name is Ada.", "What did I just tell you?"):
        print(f"you> {prompt}")
        turn = await session.run(prompt)
    state = get_state(turn)
    print(f"conversation id: {state.conversation_id if state else None}")
    return turn


def main() -> None:
    with serve() as sim:
        asyncio.run(converse(sim.openai_url))
        print("requests:")
        for r in sim.requests:
            body = r.body or {}
            print(f"  {r.method} {r.path} {r.size:>5} bytes  conversation={body.get('conversation')}")


if __name__ == "__main__":
    main()
