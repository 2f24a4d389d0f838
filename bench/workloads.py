"""Client instructions per request of the W1 and W2 tool loops: geppetto beside openai-agents and pydantic-ai.

W1: a 20-request tool loop (19 calls of one tool, each answered with a 2 KB result, then a text answer) under a
one-line system prompt; W2: the same loop under a 3 KB system prompt with 5 tools (the workloads of
bench/cost.py and bench/chain_bytes.py). Every client runs the Responses API against the scripted simulator in
another process, so only the client is counted: geppetto a :class:`~geppetto.Session` on a chained
``ResponsesEngine`` (genai-prices prices each request), openai-agents ``Runner.run`` with
``OpenAIResponsesModel``, pydantic-ai ``Agent.run`` with ``OpenAIResponsesModel``, all under the model name
``gpt-4.1-mini``. Instructions are counted by valgrind's callgrind (the same count whatever else the machine
does): a child runs one warm-up loop and then N loops, another the warm-up alone, and the difference over
20 N requests is the figure.

Run: `bench/.venv/bin/python bench/workloads.py [--loops N] [--workloads W1,W2]` (the peers are in the bench
venv: `sh bench/setup.sh`; a peer that is not installed is skipped).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from _common import API_KEY, callgrind_instructions, machine, simulator_process, table

STEPS = 20
MODEL = "gpt-4.1-mini"
TOOL = "tool_0"
RESULT = ("weather report " * 140)[:2048]
SYSTEM = {
    "W1": "You are a helpful assistant.",
    "W2": ("You are a meticulous assistant. Follow the house rules. " * 60)[:3072],
}
TOOLS = {"W1": 1, "W2": 5}
PROMPT = "Check the weather in twenty cities, one call at a time."
DRIVERS = ("geppetto", "openai-agents", "pydantic-ai")
Driver = Callable[[], Awaitable[int]]
CLOSE: list[Callable[[], Awaitable[None]]] = []


def _description(i: int) -> str:
    return f"Tool number {i}: looks something up and returns a report"


async def make_geppetto(url: str, workload: str) -> Driver:
    import geppetto as gp
    from geppetto.providers.openai_responses import ResponsesEngine

    def make(i: int) -> Any:
        def tool(city: str) -> str:
            return RESULT

        tool.__name__ = f"tool_{i}"
        tool.__doc__ = _description(i)
        return tool

    registry = gp.ToolRegistry([make(i) for i in range(TOOLS[workload])])
    engine = ResponsesEngine(MODEL, api_key=API_KEY, base_url=url, mode="chained")
    CLOSE.append(engine.aclose)

    async def run() -> int:
        session = gp.Session(engine, tools=registry, tool_loop_options={"max_iterations": STEPS})
        session.append(gp.Turn([gp.Block.system(SYSTEM[workload])]))
        await session.run(PROMPT)
        return session.usage.requests

    return run


async def make_agents(url: str, workload: str) -> Driver:
    from agents import Agent, FunctionTool, OpenAIResponsesModel, Runner, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # no trace export: loopback only

    async def invoke(ctx: Any, args: str) -> str:
        return RESULT

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tools: list[Any] = [
        FunctionTool(
            name=f"tool_{i}",
            description=_description(i),
            params_json_schema=schema,
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )
        for i in range(TOOLS[workload])
    ]
    client = AsyncOpenAI(api_key=API_KEY, base_url=url)
    CLOSE.append(client.close)
    model = OpenAIResponsesModel(model=MODEL, openai_client=client)
    agent = Agent(name="bench", instructions=SYSTEM[workload], model=model, tools=tools)

    async def run() -> int:
        result = await Runner.run(agent, PROMPT, max_turns=STEPS + 1)
        return len(result.raw_responses)

    return run


async def make_pydantic_ai(url: str, workload: str) -> Driver:
    from pydantic_ai import Agent, Tool
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    def make(i: int) -> Any:
        def tool(city: str) -> str:
            return RESULT

        return Tool(tool, name=f"tool_{i}", description=_description(i))

    model = OpenAIResponsesModel(MODEL, provider=OpenAIProvider(base_url=url, api_key=API_KEY))
    agent: Any = Agent(model, instructions=SYSTEM[workload], tools=[make(i) for i in range(TOOLS[workload])])

    async def run() -> int:
        result = await agent.run(PROMPT)
        return sum(1 for m in result.all_messages() if m.kind == "response")

    return run


FACTORIES: dict[str, Callable[[str, str], Awaitable[Driver]]] = {
    "geppetto": make_geppetto,
    "openai-agents": make_agents,
    "pydantic-ai": make_pydantic_ai,
}


async def counted_loops(url: str, driver: str, workload: str, n: int) -> None:
    """One warm-up loop (counted in both children alike), then ``n``; each must make STEPS requests."""
    run = await FACTORIES[driver](url, workload)
    for _ in range(1 + n):
        requests = await run()
        if requests != STEPS:
            raise RuntimeError(f"{driver} {workload} made {requests} requests, expected {STEPS}")
    for close in CLOSE:
        await close()


def available(driver: str) -> bool:
    module = {"geppetto": "geppetto", "openai-agents": "agents", "pydantic-ai": "pydantic_ai"}[driver]
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def main(loops: int, workloads: list[str], only: list[str]) -> int:
    drivers = [d for d in DRIVERS if d in only and available(d)]
    for d in only:
        if d not in drivers:
            print(f"skipped {d}: not installed; run `sh bench/setup.sh` and use bench/.venv/bin/python")
    per_request: dict[tuple[str, str], float] = {}
    with simulator_process(STEPS, TOOL) as url:
        for workload in workloads:
            for driver in drivers:

                def count(n: int, driver: str = driver, workload: str = workload) -> int:
                    return callgrind_instructions(sys.executable, __file__, "--count", url, driver, workload, str(n))

                per_request[driver, workload] = (count(loops) - count(0)) / (loops * STEPS)
    print(f"# client instructions per request, {STEPS}-request tool loops (callgrind, {loops} loops); {machine()}")
    if "geppetto" not in drivers:
        print(
            table(
                ["workload", *drivers], [[w, *(f"{per_request[d, w] / 1e3:,.0f}k" for d in drivers)] for w in workloads]
            )
        )
        return 0
    peers = [d for d in drivers if d != "geppetto"]
    headers = ["workload", *(f"{d}" for d in drivers), *(f"geppetto / {p}" for p in peers)]
    rows = []
    summary = []
    for w in workloads:
        g = per_request["geppetto", w]
        ratios = [g / per_request[p, w] for p in peers]
        rows.append([w, *(f"{per_request[d, w] / 1e3:,.0f}k" for d in drivers), *(f"{r:.3f}" for r in ratios)])
        summary.append(f"{w} " + " / ".join(f"{r:.3f}x {p}" for r, p in zip(ratios, peers, strict=True)))
    print(table(headers, rows))
    print(
        f"SUMMARY geppetto client instructions per request: {'; '.join(summary)} (targets W1 <= 0.19 / 0.12, W2 <= 0.14 / 0.10)"
    )
    return 0


def tiny(workloads: list[str], only: list[str]) -> int:
    """Each loop once, uncounted (no valgrind): the smoke test that keeps this script running."""
    drivers = [d for d in DRIVERS if d in only and available(d)]
    with simulator_process(STEPS, TOOL) as url:
        for workload in workloads:
            for driver in drivers:
                subprocess.run(
                    [sys.executable, __file__, "--count", url, driver, workload, "1"], check=True, timeout=300
                )
    print(f"SUMMARY tiny run: {', '.join(drivers)} ran {', '.join(workloads)} once each, uncounted")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--count"]:
        asyncio.run(counted_loops(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=3, help="counted loops per client and workload")
    parser.add_argument("--workloads", default="W1,W2", help="W1, W2 or both")
    parser.add_argument("--drivers", default=",".join(DRIVERS), help="clients to count (geppetto, the peers)")
    parser.add_argument("--tiny", action="store_true", help="run each loop once without counting (a smoke test)")
    args = parser.parse_args()
    split = [w.strip() for w in args.workloads.split(",")], [d.strip() for d in args.drivers.split(",")]
    sys.exit(tiny(*split) if args.tiny else main(args.loops, *split))
