"""Client overhead of one 5-step tool loop against the simulator in a separate process (issue 8).

Drivers: (a) raw httpx replaying exactly the request bodies geppetto sends (captured in a first run;
the least a client can do: send the bytes, read the stream to its end); (b) geppetto
(ResponsesEngine + tool_loop, chained mode, streaming, as configured by default: the engine makes and
keeps its own client); (c) openai-agents Runner with
OpenAIResponsesModel; (d) pydantic-ai Agent with OpenAIResponsesModel; (e) a hand-written loop on the
official openai SDK (streaming, previous_response_id). CPU time (time.process_time, this process
only; the server runs elsewhere) and wall time per model step, interleaved rounds, medians.
Run: `bench/.venv/bin/python bench/overhead.py [ROUNDS] [--only a,b]` (``--only`` picks drivers by letter,
for quick A/B runs of geppetto against raw httpx).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from _common import (
    API_KEY,
    INSTRUCTIONS,
    PROMPT,
    callgrind_instructions,
    machine,
    median,
    pydantic_ai_loop,
    simulator_process,
    table,
    weather,
)

STEPS = 5
Driver = Callable[[], Awaitable[int]]
CLOSE: list[Callable[[], Awaitable[None]]] = []
"""What the drivers opened (clients, engines), closed once the rounds are over."""


async def make_geppetto(url: str, capture: list[bytes] | None = None, mode: str = "chained") -> Driver:
    import geppetto as gp
    from geppetto.providers.openai_responses import ResponsesEngine

    async def hook(request: httpx.Request) -> None:
        if capture is not None and request.method == "POST":
            capture.append(request.content)

    client = httpx.AsyncClient(event_hooks={"request": [hook]}) if capture is not None else None

    @gp.tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        return weather(city)

    registry = gp.ToolRegistry([get_weather])
    engine = ResponsesEngine("sim-1", api_key=API_KEY, base_url=url, http=client, mode=mode)
    CLOSE.append(engine.aclose)
    if client is not None:
        CLOSE.append(client.aclose)
    loop = gp.with_middleware(engine, gp.middleware.tool_loop(registry))

    async def run() -> int:
        turn = gp.Turn()
        turn.append(gp.Block.system(INSTRUCTIONS))
        turn.append(gp.Block.user(PROMPT))
        out = await loop.run_inference(turn)
        return sum(1 for b in out.blocks if b.kind is gp.BlockKind.LLM_TEXT or b.kind is gp.BlockKind.TOOL_CALL)

    return run


async def make_raw(url: str, mode: str = "chained") -> Driver:
    bodies: list[bytes] = []
    capture = await make_geppetto(url, bodies, mode=mode)
    await capture()
    if len(bodies) != STEPS:
        raise RuntimeError(f"captured {len(bodies)} geppetto requests, expected {STEPS}")
    client = httpx.AsyncClient()
    CLOSE.append(client.aclose)
    headers = {"authorization": f"Bearer {API_KEY}", "content-type": "application/json"}

    async def run() -> int:
        for body in bodies:
            async with client.stream("POST", f"{url}/responses", content=body, headers=headers) as resp:
                resp.raise_for_status()
                async for _ in resp.aiter_bytes():
                    pass
        return len(bodies)

    return run


async def make_agents(url: str) -> Driver:
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # no trace export: loopback only

    @function_tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        return weather(city)

    client = AsyncOpenAI(api_key=API_KEY, base_url=url)
    CLOSE.append(client.close)
    model = OpenAIResponsesModel(model="sim-1", openai_client=client)
    agent = Agent(name="bench", instructions=INSTRUCTIONS, model=model, tools=[get_weather])

    async def run() -> int:
        result = await Runner.run(agent, PROMPT, max_turns=10)
        return len(result.raw_responses)

    return run


async def make_pydantic_ai(url: str) -> Driver:
    return pydantic_ai_loop(url, instructions=INSTRUCTIONS)


async def make_openai_sdk(url: str) -> Driver:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key=API_KEY, base_url=url)
    CLOSE.append(client.close)
    tools: Any = [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Get the current weather for a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            "strict": False,
        }
    ]

    async def run() -> int:
        items: list[Any] = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": PROMPT},
        ]
        previous: str | None = None
        steps = 0
        while True:
            kwargs: dict[str, Any] = {"previous_response_id": previous} if previous else {}
            stream = await client.responses.create(model="sim-1", input=items, tools=tools, stream=True, **kwargs)
            response = None
            async for event in stream:
                if event.type == "response.completed":
                    response = event.response
            steps += 1
            assert response is not None
            previous = response.id
            calls = [o for o in response.output if o.type == "function_call"]
            if not calls:
                return steps
            items = [
                {"type": "function_call_output", "call_id": c.call_id, "output": weather(**json.loads(c.arguments))}
                for c in calls
            ]

    return run


BASE = "raw httpx (a)"
FACTORIES: dict[str, Callable[[str], Awaitable[Driver]]] = {
    BASE: make_raw,
    "geppetto (b)": make_geppetto,
    "openai-agents (c)": make_agents,
    "pydantic-ai (d)": make_pydantic_ai,
    "openai SDK loop (e)": make_openai_sdk,
}


async def main(rounds: int, only: str) -> int:
    with simulator_process(STEPS) as url:
        drivers: dict[str, Driver] = {}
        skipped: dict[str, str] = {}
        letters = {x.strip() for x in only.split(",")} if only else None
        for name, factory in FACTORIES.items():
            if letters is not None and name[-2] not in letters and name != BASE:
                continue
            try:
                drivers[name] = await factory(url)
                steps = await drivers[name]()  # warm-up, and a check that the loop really has STEPS steps
                if steps != STEPS:
                    raise RuntimeError(f"ran {steps} model steps, expected {STEPS}")
            except ImportError as exc:
                skipped[name] = f"not installed ({exc.name}); run `sh bench/setup.sh`"
                drivers.pop(name, None)
        # Every driver's modules share this process's heap. A full garbage collection walks all of it, so
        # without this whichever driver happens to trigger one pays for the others' imports as well.
        gc.collect()
        gc.freeze()
        cpu: dict[str, list[float]] = {n: [] for n in drivers}
        wall: dict[str, list[float]] = {n: [] for n in drivers}
        for _ in range(rounds):
            for name, run in drivers.items():
                c0, w0 = time.process_time(), time.perf_counter()
                await run()
                cpu[name].append((time.process_time() - c0) / STEPS * 1e3)
                wall[name].append((time.perf_counter() - w0) / STEPS * 1e3)
        for close in CLOSE:
            await close()
    rows = []
    for name in drivers:
        c, w = median(cpu[name]), median(wall[name])
        rows.append([name, c, w, c / median(cpu[BASE]), w / median(wall[BASE])])
    print(f"# overhead: {STEPS}-step tool loop, {rounds} interleaved rounds; {machine()}")
    print(table(["driver", "CPU ms/step", "wall ms/step", "CPU x raw", "wall x raw"], rows))
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    g = median(cpu["geppetto (b)"])
    peers = [n for n in drivers if n != BASE and not n.startswith("geppetto")]
    summary = ", ".join(f"{g / median(cpu[n]):.2f}x {n.split(' (')[0]}" for n in peers)
    print(
        f"SUMMARY geppetto CPU/step = {g / median(cpu[BASE]):.2f}x raw httpx (target <= 1.5);"
        f" vs peers: {summary} (target <= 0.5 each)"
    )
    return 0


# -- instructions ---------------------------------------------------------------------------------
INSTRUCTION_MODES = ("chained", "stateless")


async def counted_loops(url: str, driver: str, mode: str, n: int) -> None:
    """Driver ``driver`` ("raw": raw httpx replaying the bodies geppetto sends in ``mode``, or "geppetto") in
    ``mode``: three warm-up loops (counted in every child alike), then ``n``."""
    run = await make_raw(url, mode) if driver == "raw" else await make_geppetto(url, mode=mode)
    for _ in range(3 + n):
        if await run() != STEPS:
            raise RuntimeError(f"the {driver} {mode} loop did not run {STEPS} model steps")
    for close in CLOSE:
        await close()


def count_instructions(n: int, modes: tuple[str, ...] = INSTRUCTION_MODES) -> None:
    """geppetto's client instructions per step beside raw httpx sending the same bytes, per mode, one run."""
    with simulator_process(STEPS) as url:

        def per_step(driver: str, mode: str) -> float:
            def count(loops: int) -> int:
                return callgrind_instructions(sys.executable, __file__, "--count", url, driver, mode, str(loops))

            return (count(n) - count(0)) / (n * STEPS)

        counts = {mode: (per_step("raw", mode), per_step("geppetto", mode)) for mode in modes}
    print(f"# client instructions per model step, {STEPS}-step tool loop (callgrind, {n} loops); {machine()}")
    rows = [[m, f"{r / 1e3:,.0f}k", f"{g / 1e3:,.0f}k", f"{g / r:.2f}x"] for m, (r, g) in counts.items()]
    print(table(["mode", "raw httpx, same bytes", "geppetto", "geppetto x raw"], rows))
    ratios = ", ".join(f"{g / r:.2f}x {m}" for m, (r, g) in counts.items())
    print(f"SUMMARY geppetto instructions/step = {ratios} raw httpx sending the same bytes (target <= 1.3)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--count"]:
        asyncio.run(counted_loops(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", nargs="?", type=int, default=30)
    parser.add_argument("--only", default="", help="driver letters to run, e.g. b or b,e (raw httpx always runs)")
    parser.add_argument(
        "--instructions",
        nargs="?",
        type=int,
        const=40,
        metavar="N",
        help="count geppetto's instructions per step over N loops per mode (callgrind) instead of timing",
    )
    parser.add_argument(
        "--modes", default=",".join(INSTRUCTION_MODES), help="with --instructions: chained, stateless or both"
    )
    args = parser.parse_args()
    if args.instructions is not None:
        count_instructions(args.instructions, tuple(m.strip() for m in args.modes.split(",")))
        sys.exit(0)
    sys.exit(asyncio.run(main(args.rounds, args.only)))
