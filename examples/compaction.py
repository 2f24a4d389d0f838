"""History compaction on a chained Responses session: once the Turn passes eight blocks, the blocks before
the last two steps are replaced by a summary the same model writes (``summarize_with``; on the Responses
API ``engine.compact``, its ``POST /responses/compact``, is the other compactor). The request after a
compaction starts a new chain (the server's chain no longer matches the Turn: one logged fallback,
``fingerprint_mismatch``); the requests after it chain again. Runs offline against the simulator.

    python examples/compaction.py
"""

from __future__ import annotations

import asyncio

import geppetto as gp
from geppetto.middleware.compaction import COMPACTION, compaction, summarize_with
from geppetto.providers.openai_responses import ResponsesEngine, ResponsesMetrics
from geppetto.simulator import serve

PROMPTS = (
    "My name is Ada.",
    "I live in Lisbon.",
    "I like tea.",
    "I work on compilers.",
    "I have a cat.",
    "What do you know?",
    "Anything else?",
)


async def converse(base_url: str) -> ResponsesMetrics:
    metrics = ResponsesMetrics()
    engine = ResponsesEngine(model="sim-1", api_key="sk-sim", base_url=base_url, metrics=metrics)
    session = gp.Session(engine, middlewares=[compaction(summarize_with(engine), max_blocks=8, keep_last=2)])
    for prompt in PROMPTS:
        turn = await session.run(prompt)
        kinds = " ".join(b.kind.value for b in turn.blocks)
        replaced = {
            i for b in turn.blocks if COMPACTION.has(b.metadata) for i in COMPACTION.get(b.metadata)["replaced"]
        }
        print(f"{prompt!r:24} -> {len(turn.blocks)} blocks: {kinds} ({len(replaced)} blocks compacted)")
    return metrics


def main() -> None:
    with serve() as sim:
        metrics = asyncio.run(converse(sim.openai_url))
        print("requests:")
        for r in sim.requests:
            body = r.body or {}
            items = body.get("input") or []
            chained = bool(body.get("previous_response_id"))
            summary = " (the summary)" if items and str(items[0].get("content", "")).startswith("You compress") else ""
            print(f"  {r.method} {r.path} input items={len(items)} chained={chained}{summary}")
        counters = metrics.snapshot()["counters"]
        print(
            f"fallbacks: {counters.get('fallback', 0)} ({', '.join(k for k in counters if k.startswith('fallback:'))})"
        )


if __name__ == "__main__":
    main()
