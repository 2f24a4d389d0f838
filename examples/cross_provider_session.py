"""One conversation, three providers: the Turn is canonical, so each step may use another engine.
OpenAI Responses answers first (with a tool call), then Claude, then Gemini continue the same Turn.
Runs offline against the simulator, which speaks all three APIs.

    python examples/cross_provider_session.py
"""

from __future__ import annotations

import asyncio

import geppetto as gp
from geppetto.events import TextPrinter
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import serve


@gp.tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: 25°C, sunny"


async def converse(openai_url: str, url: str) -> gp.Turn:
    registry = gp.ToolRegistry([get_weather])
    tools = registry.list()
    steps: list[tuple[str, gp.Engine, str]] = [
        (
            "openai",
            ResponsesEngine(model="sim-1", api_key="sk-sim", base_url=openai_url, tools=tools),
            "What is the weather in Madrid?",
        ),
        (
            "claude",
            ClaudeEngine(model="sim-1", api_key="sk-sim", base_url=url, tools=tools),
            "And the weather in Rome?",
        ),
        (
            "gemini",
            GeminiEngine(model="sim-1", api_key="sk-sim", base_url=url, tools=tools),
            "Summarize what we discussed.",
        ),
    ]
    session = gp.Session(steps[0][1], tools=registry, sinks=[TextPrinter()])
    for name, engine, prompt in steps:
        session.use(engine)  # the same Session and Turn continue on another provider
        print(f"\n[{name}] you> {prompt}")
        turn = await session.run(prompt)
    return turn


def main() -> None:
    with serve() as sim:
        turn = asyncio.run(converse(sim.openai_url, sim.url))
        print("\npaths:", [r.path.split("/")[-1] for r in sim.requests])
    print("blocks:", [b.kind.value for b in turn.blocks])


if __name__ == "__main__":
    main()
