"""Tools that wait for a person: a call that needs approval pauses the session, which is saved; another
process (or a later run) restores it, approves or denies, and the model goes on, chained from the response
that asked. A client-side tool waits the same way for the client's result. Runs offline against the
simulator.

    python examples/approval.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.session.stores import open_store
from geppetto.simulator import serve


@gp.tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@gp.tool(requires_approval=lambda args: args["amount"] > 100)
def pay(amount: int) -> str:
    """Pay an amount in euros."""
    return f"paid {amount} EUR"


def pick_color(subject: str) -> str:
    """Ask the user to pick a color for something."""
    raise NotImplementedError  # never called: the client runs it


TOOLS = [delete_file, pay, gp.client_tool(pick_color)]


async def main(base_url: str, store_path: str) -> None:
    def engine() -> ResponsesEngine:
        return ResponsesEngine(model="sim-1", api_key="sk-sim", base_url=base_url, mode="chained")

    # 1. The model asks to delete a file: the inference ends with the call waiting, and the Turn is saved.
    session = gp.Session(engine(), tools=TOOLS, store=open_store(store_path))
    await session.run("delete_file for 'notes.txt'")
    for call in session.pending_approvals:
        print(f"waiting: {call.name}({call.arguments}) [{call.kind}]")
    try:
        session.prompt("something else")
    except gp.ApprovalPendingError as exc:
        print(f"prompt refused: {str(exc).split(';')[0]}")

    # 2. Later, anywhere: restore the session and answer. True approves, False or a reason denies.
    later = await gp.Session.restore(engine(), open_store(store_path), session.session_id, tools=TOOLS)
    [call] = later.pending_approvals
    turn = await later.resume({call.call_id: True})
    print(f"approved -> {turn.blocks[-2].payload['result']!r}; the model: {turn.blocks[-1].text}")

    # 3. A small payment runs at once, a large one waits; deny it with a reason the model reads.
    await later.run("pay for 500")
    [call] = later.pending_approvals
    turn = await later.resume({call.call_id: "over the monthly budget"})
    print(f"denied -> {turn.blocks[-2].payload['error']!r}")

    # 4. A client-side tool: the client runs it and resume takes its result.
    await later.run("pick_color for 'the kitchen'")
    [call] = later.pending_approvals
    turn = await later.resume({call.call_id: "sage green"})
    print(f"client result -> {turn.blocks[-2].payload['result']!r}")


if __name__ == "__main__":
    with serve() as sim, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(sim.openai_url, str(Path(tmp) / "sessions.db")))
        chained = [bool((r.body or {}).get("previous_response_id")) for r in sim.requests if r.path == "/v1/responses"]
        print(f"requests: {len(chained)}, chained after the first: {all(chained[1:])}")
