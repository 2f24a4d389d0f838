"""In-request compaction (issue 31): what a long chained tool loop costs with and without ``compact_threshold``.

A 300-step tool loop (each tool result about 40 words) on the Responses engine in chained mode against the
in-process simulator, once without compaction and once with ``compact_threshold=2000``. Per run: the
bytes of every request body, the input tokens the simulated model read on the last request and at most,
the server compactions, and the requests that were not chained. Without compaction the context grows
with every step; with it the server folds its copy whenever it passes the threshold, the chain goes on,
and what the model reads stays bounded.

Run: `.venv/bin/python bench/server_compaction.py` (``--tiny``: 10 steps). Prints a Markdown table and a last `SUMMARY:` line.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from _common import table

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.providers.openai_responses._items import server_compaction
from geppetto.simulator import Reply, ToolCall, serve
from geppetto.turns import TURN_META_USAGE, Turn

STEPS = 10 if "--tiny" in sys.argv else 300  # --tiny: the smoke test of tests/bench


@gp.tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"{city}: " + "light rain, 18C, wind from the west at twelve knots, humidity high; " * 3


async def run(threshold: int | None) -> dict[str, Any]:
    with serve() as sim:
        sim.queue(*[Reply(tool_calls=[ToolCall("get_weather", {"city": f"city{i}"})]) for i in range(STEPS - 1)])
        sim.queue(Reply(text="done"))
        engine = ResponsesEngine("sim-1", api_key="k", base_url=sim.openai_url, compact_threshold=threshold)
        tokens: list[int] = []

        async def counted(turn: Turn) -> Turn:
            out = await engine.run_inference(turn)
            usage = TURN_META_USAGE.get(out.metadata) or {}
            tokens.append(int(usage.get("input_tokens", 0)))
            return out

        class Counting:
            run_inference = staticmethod(counted)

        session = gp.Session(Counting(), tools=[get_weather], tool_loop_options={"max_iterations": STEPS + 1})
        out = await session.run("Check the weather in 300 cities, one at a time.")
        posts = [r for r in sim.requests if r.path == "/v1/responses"]
        await engine.aclose()
        return {
            "compact_threshold": threshold or "none",
            "requests": len(posts),
            "not chained": sum(1 for r in posts if not r.body.get("previous_response_id")),
            "request KB": round(sum(r.size for r in posts) / 1024, 1),
            "compactions": sum(1 for b in out.blocks if server_compaction(b)),
            "input tokens, last": tokens[-1],
            "input tokens, max": max(tokens),
            "input tokens, all requests": sum(tokens),
        }


async def main() -> None:
    rows = [await run(None), await run(2000)]
    print(table(list(rows[0]), [list(r.values()) for r in rows]))
    plain, compacted = rows
    print(
        f"SUMMARY: {STEPS}-step chained loop: the model read {plain['input tokens, all requests']} input tokens "
        f"without compaction, {compacted['input tokens, all requests']} with compact_threshold=2000 "
        f"({compacted['compactions']} server compactions, at most {compacted['input tokens, max']} per request, "
        f"{compacted['not chained']} request(s) not chained)"
    )


if __name__ == "__main__":
    asyncio.run(main())
