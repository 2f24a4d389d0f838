"""What a session costs, and a limit that stops it: a Claude tool loop priced with a table of your own (or
genai-prices), cache reads and writes from the default prompt caching, and a UsageLimits that raises
before the request that would pass it. Runs offline against the simulator.

    python examples/cost_and_limits.py
"""

from __future__ import annotations

import asyncio

import geppetto as gp
from geppetto.pricing import BLOCK_META_USAGE, Rates, StaticPrices
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.simulator import serve

# USD per million tokens: the simulator's model is in no price database.
PRICES = StaticPrices({"sim-1": Rates(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)})
RULES = " ".join(f"House rule {i}: answer briefly and cite the tool you used." for i in range(120))


@gp.tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"{city}: 18°C, light rain"


async def main(url: str) -> None:
    engine = ClaudeEngine("sim-1", api_key="sk-sim", base_url=url)
    session = gp.Session(engine, tools=[get_weather], prices=PRICES)
    session.append(gp.Turn([gp.Block.system(RULES)]))
    for prompt in ("What is the weather in Lisbon?", "And the weather in Oslo?"):
        turn = await session.run(prompt)
        for block in turn.blocks:
            stamp = BLOCK_META_USAGE.get(block.metadata)
            if stamp is not None and block.turn_id == turn.id:
                u, cost = stamp["usage"], stamp["cost"]
                print(
                    f"request: {u['input_tokens']} in ({u['cached_tokens']} cached, {u['cache_write_tokens']} written)"
                    f", {u['output_tokens']} out: ${cost['total']:.6f} (${cost['uncached']:.6f} without caching)"
                )
    usage = session.usage
    print(f"session: {usage.requests} requests, {usage.cached_tokens} tokens cached, ${usage.cost:.6f}")

    session.limits = gp.UsageLimits(max_requests=usage.requests + 1)
    try:
        await session.run("And the weather in Paris?")
    except gp.UsageLimitExceeded as err:
        print(f"stopped: {err.limit} at {err.value:g}; the Turn kept {len(err.turn.blocks)} blocks")


if __name__ == "__main__":
    with serve() as sim:
        asyncio.run(main(sim.url))
