"""A chained tool loop: a Session with tools over the Responses API in chained mode. Each request sends
``previous_response_id`` and only the blocks the server has not seen. Runs offline against the simulator.

    python examples/chained_tool_loop.py
"""

from __future__ import annotations

import asyncio

import geppetto as gp
from geppetto.events import TextPrinter
from geppetto.providers.openai_responses import ResponsesEngine, find_best_anchor
from geppetto.simulator import serve


@gp.tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@gp.tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: 18°C, light rain"


async def converse(sim: object, base_url: str) -> gp.Turn:
    registry = gp.ToolRegistry([add, get_weather])
    engine = ResponsesEngine(model="sim-1", api_key="sk-sim", base_url=base_url, mode="chained", tools=registry.list())
    session = gp.Session(engine, tools=registry, sinks=[TextPrinter()])
    for prompt in ("What is the weather in Lisbon?", "Please add 2 and 2", "Thanks!"):
        print(f"\nyou> {prompt}")
        turn = await session.run(prompt)
        print(f"(anchor for the next request: {find_best_anchor(turn)})")
    assert session.latest is not None
    return session.latest


def main() -> None:
    with serve() as sim:
        asyncio.run(converse(sim, sim.openai_url))
        print("\nrequests:")
        for r in sim.requests:
            body = r.body or {}
            print(
                f"  {r.path} {r.size:>5} bytes  previous_response_id={body.get('previous_response_id')}"
                f"  input items={len(body.get('input') or [])}"
            )


if __name__ == "__main__":
    main()
