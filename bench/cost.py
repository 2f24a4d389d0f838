"""Tokens and cost per workload and mode, against the simulator (issue 33).

Workloads (as in bench/chain_bytes.py):
  W1: a 20-step tool loop (19 tool calls, each answered with a 2 KB result, then a text answer), a one-line
      system prompt, one tool.
  W2: the same loop with a 3 KB system prompt and 5 tools.
  C10: a 10-prompt conversation (one answer per prompt, no tools) over the W2 system prompt.
Modes: the Responses engine stateless, chained and conversation; Chat Completions; Claude with prompt caching
(the default) and without; Gemini (implicit caching). Each engine runs under a real model name so
genai-prices prices it (gpt-4.1-mini, claude-sonnet-4-5, gemini-2.5-flash); the simulator reports the
usage, cache reads and writes as the services do (its tokenizer is not theirs: compare rows, not invoices).

Every figure is what `Session.usage` summed from the usage each request reported, priced per request
(uncached input, cache reads, cache writes, output). The "stateless $" column prices the same requests as if
nothing had been cached: what the caching saved.

Peers (W1, W2): openai-agents and pydantic-ai on the Responses API against the same simulator and replies,
their reported usage priced with the same table (rows only when they are installed: bench/.venv).

Run: `.venv/bin/python bench/cost.py` (needs the `prices` extra), or with the peers
`PYTHONPATH=src bench/.venv/bin/python bench/cost.py`. Prints a Markdown table and a last `SUMMARY:` line.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from _common import table

import geppetto as gp
from geppetto.events import Event, EventFinal, Usage, with_sinks
from geppetto.pricing import current_prices
from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.tools import ToolRegistry

STEPS = 20
PROMPTS = 10
RESULT = ("weather report " * 140)[:2048]
SYSTEM_W1 = "You are a helpful assistant."
SYSTEM_W2 = ("You are a meticulous assistant. Follow the house rules. " * 60)[:3072]

MODES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "responses stateless": ("openai-responses", "gpt-4.1-mini", {"mode": "stateless"}),
    "responses chained": ("openai-responses", "gpt-4.1-mini", {"mode": "chained"}),
    "responses conversation": ("openai-responses", "gpt-4.1-mini", {"mode": "conversation"}),
    "chat completions": ("openai-chat", "gpt-4.1-mini", {}),
    "claude (cache on)": ("anthropic", "claude-sonnet-4-5", {}),
    "claude (cache off)": ("anthropic", "claude-sonnet-4-5", {"prompt_cache": False}),
    "gemini (implicit cache)": ("gemini", "gemini-2.5-flash", {}),
}


def _tools(n: int) -> ToolRegistry:
    def make(i: int) -> Any:
        def tool(city: str) -> str:
            return RESULT

        tool.__name__ = f"tool_{i}"
        tool.__doc__ = f"Tool number {i}: looks something up and returns a report"
        return tool

    return ToolRegistry([make(i) for i in range(n)])


def _uncached_cost(provider: str, model: str, usage: Usage) -> float:
    """The request priced as if no token had been read from or written to a cache."""
    plain = Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    rates = current_prices().rates(provider, model, plain)
    return rates.cost(plain).total if rates is not None else float("nan")


async def _run(sim: Simulator, workload: str, provider: str, model: str, options: dict[str, Any]) -> dict[str, Any]:
    sim.reset()
    finals: list[Event] = []
    async with sim.engine(provider, model=model, **options) as engine:
        if workload == "C10":
            session = gp.Session(engine)
            session.append(gp.Turn([gp.Block.system(SYSTEM_W2)]))
            with with_sinks(finals.append):
                for i in range(PROMPTS):
                    sim.queue(Reply(text=f"Answer number {i}: " + "details " * 40))
                    await session.run(f"Question {i}: tell me about city number {i}.")
        else:
            system, tools = (SYSTEM_W1, 1) if workload == "W1" else (SYSTEM_W2, 5)
            calls = [Reply(tool_calls=[ToolCall("tool_0", {"city": f"c{i}"})]) for i in range(STEPS - 1)]
            sim.queue(*calls, Reply(text="All done."))
            session = gp.Session(engine, tools=_tools(tools), tool_loop_options={"max_iterations": STEPS})
            session.append(gp.Turn([gp.Block.system(system)]))
            with with_sinks(finals.append):
                await session.run("Check the weather in twenty cities, one call at a time.")
    usage = session.usage
    plain = sum(
        _uncached_cost(e.metadata.provider, model, e.metadata.usage)
        for e in finals
        if isinstance(e, EventFinal) and e.metadata.usage is not None
    )
    return {"usage": usage, "uncached": plain}


async def _peer(sim: Simulator, peer: str, workload: str) -> gp.SessionUsage | None:
    """The W1/W2 loop on a peer (openai-agents or pydantic-ai, Responses API, model gpt-4.1-mini), its usage
    as it reports it (a run's totals: requests, input, cached and output tokens), priced with the same table.
    None when the peer is not installed (run with bench/.venv)."""
    sim.reset()
    system, count = (SYSTEM_W1, 1) if workload == "W1" else (SYSTEM_W2, 5)
    calls = [Reply(tool_calls=[ToolCall("tool_0", {"city": f"c{i}"})]) for i in range(STEPS - 1)]
    sim.queue(*calls, Reply(text="All done."))
    prompt = "Check the weather in twenty cities, one call at a time."
    functions = list(_tools(count).list())
    try:
        if peer == "openai-agents":
            from agents import Agent, FunctionTool, OpenAIResponsesModel, Runner, set_tracing_disabled
            from openai import AsyncOpenAI

            set_tracing_disabled(True)

            def agent_tool(spec: Any) -> Any:
                async def invoke(ctx: Any, args: str) -> str:
                    return RESULT

                return FunctionTool(
                    name=spec.name,
                    description=spec.description,
                    params_json_schema=spec.parameters,
                    on_invoke_tool=invoke,
                    strict_json_schema=False,
                )

            client = AsyncOpenAI(api_key="sk-test", base_url=sim.openai_url)
            model = OpenAIResponsesModel(model="gpt-4.1-mini", openai_client=client)
            agent = Agent(name="bench", instructions=system, model=model, tools=[agent_tool(f) for f in functions])
            result = await Runner.run(agent, prompt, max_turns=STEPS + 1)
            await client.close()
            u = result.context_wrapper.usage
            cached = int(getattr(u.input_tokens_details, "cached_tokens", 0) or 0)
            usage = Usage(input_tokens=u.input_tokens, output_tokens=u.output_tokens, cached_tokens=cached)
            requests = u.requests
        else:
            from pydantic_ai import Agent as PAgent
            from pydantic_ai import Tool
            from pydantic_ai.models.openai import OpenAIResponsesModel as PModel
            from pydantic_ai.providers.openai import OpenAIProvider

            def make(name: str) -> Any:
                def tool(city: str) -> str:
                    return RESULT

                return Tool(tool, name=name, description="looks something up and returns a report")

            pmodel = PModel("gpt-4.1-mini", provider=OpenAIProvider(base_url=sim.openai_url, api_key="sk-test"))
            pagent: Any = PAgent(pmodel, instructions=system, tools=[make(f.name) for f in functions])
            presult = await pagent.run(prompt)
            ru = presult.usage
            ru = ru if hasattr(ru, "input_tokens") else ru()
            usage = Usage(
                input_tokens=ru.input_tokens, output_tokens=ru.output_tokens, cached_tokens=ru.cache_read_tokens
            )
            requests = ru.requests
    except ImportError:
        return None
    totals = gp.SessionUsage()
    rates = current_prices().rates("openai", "gpt-4.1-mini", usage)
    totals.add(usage, rates.cost(usage).total if rates is not None else None)
    totals.requests = requests
    return totals


def main() -> int:
    rows: list[list[Any]] = []
    summary: list[str] = []
    with serve() as sim:
        for workload in ("W1", "W2", "C10"):
            for mode, (provider, model, options) in MODES.items():
                result = asyncio.run(_run(sim, workload, provider, model, options))
                u: gp.SessionUsage = result["usage"]
                cost = "unpriced" if u.cost is None else f"{u.cost:.4f}"
                saved = "" if u.cost is None else f"{1 - u.cost / result['uncached']:.1%}"
                rows.append(
                    [
                        workload,
                        mode,
                        model,
                        u.requests,
                        f"{u.input_tokens:,}",
                        f"{u.cached_tokens:,}",
                        f"{u.cache_write_tokens:,}",
                        f"{u.output_tokens:,}",
                        cost,
                        f"{result['uncached']:.4f}",
                        saved,
                    ]
                )
                summary.append(f"{workload} {mode}=${cost}")
            for peer in ("openai-agents", "pydantic-ai") if workload != "C10" else ():
                pu = asyncio.run(_peer(sim, peer, workload))
                if pu is None:
                    continue
                pcost = "unpriced" if pu.cost is None else f"{pu.cost:.4f}"
                rows.append(
                    [
                        workload,
                        f"{peer} (Responses)",
                        "gpt-4.1-mini",
                        pu.requests,
                        f"{pu.input_tokens:,}",
                        f"{pu.cached_tokens:,}",
                        "",
                        f"{pu.output_tokens:,}",
                        pcost,
                        "",
                        "",
                    ]
                )
                summary.append(f"{workload} {peer}=${pcost}")
    headers = ["workload", "mode", "model", "requests", "input", "cached", "written", "output", "$", "stateless $"]
    print(table([*headers, "saved"], rows))
    print()
    print(f"SUMMARY: {'; '.join(summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
