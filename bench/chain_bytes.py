"""Request bytes per conversation mode against the simulator (issue 9).

W1: a 20-step tool loop with 2 KB tool results and a one-line system prompt, one tool.
W2: the same with a 3 KB system prompt and 5 tools.
Modes: stateless, chained, conversation, and "instructions" (chained, but the system prompt re-sent as
`instructions` on every request, as openai-agents and pydantic-ai do). The ideal is, per request, the
delta items plus only the fields the API needs every time (model, tools, previous_response_id or
conversation, stream). Run: `.venv/bin/python bench/chain_bytes.py`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from geppetto.providers.openai_responses import ResponsesEngine, blocks_to_items
from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.turns import BLOCK_META_RESPONSE_ID, Block, BlockKind, Turn

STEPS = 20
RESULT = ("weather report " * 140)[:2048]
RESPONSE_ID_LEN = len("resp_") + 32


def _tool(i: int) -> dict[str, Any]:
    return {
        "name": f"tool_{i}",
        "description": f"Tool number {i}: looks something up and returns a report",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }


WORKLOADS = {
    "W1": ("You are a helpful assistant.", [_tool(0)]),
    "W2": (("You are a meticulous assistant. Follow the house rules. " * 60)[:3072], [_tool(i) for i in range(5)]),
}
MODES = {
    "stateless": {"mode": "stateless"},
    "chained": {"mode": "chained"},
    "conversation": {"mode": "conversation"},
    "instructions": {"mode": "chained", "instructions_mode": True},
}


def _size(body: dict[str, Any]) -> int:
    return len(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode())


async def _run(
    sim: Simulator, system: str, tools: list[dict[str, Any]], options: dict[str, Any]
) -> tuple[int, int, list[Any]]:
    """Run the workload; return (request bytes, ideal bytes, normalized final context)."""
    sim.reset()
    eng = ResponsesEngine("sim-1", api_key="sk-test", base_url=sim.openai_url, tools=tools, **options)
    tool_dicts = eng.tools
    turn = Turn()
    turn.append(Block.system(system))
    turn.append(Block.user("Check the weather in twenty cities, one call at a time."))
    ideal, sent = 0, 0
    for step in range(STEPS):
        last = step == STEPS - 1
        sim.queue(Reply(text="All done.") if last else Reply(tool_calls=[ToolCall("tool_0", {"city": f"city{step}"})]))
        delta = turn.blocks[sent:]
        body: dict[str, Any] = {
            "model": eng.model,
            "input": blocks_to_items(delta),
            "tools": tool_dicts,
            "stream": True,
        }
        if step:
            body["previous_response_id"] = "x" * RESPONSE_ID_LEN
        ideal += _size(body)
        turn = await eng.run_inference(turn)
        sent = len(turn.blocks)
        if not last:
            call = turn.blocks[-1]
            assert call.kind is BlockKind.TOOL_CALL
            turn.append(Block.tool_use(call.payload["id"], RESULT))
    total = sum(r.size for r in sim.requests)
    rid = turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]
    context = [_norm(i) for i in sim.context_items(rid)]
    if options.get("instructions_mode"):
        context.insert(0, ("message", "system", system))
    return total, ideal, context


def _norm(item: dict[str, Any]) -> tuple[Any, ...]:
    kind = item.get("type") or "message"
    if kind == "message":
        content = item.get("content")
        text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])
        return ("message", item.get("role"), text)
    if kind == "function_call":
        return (kind, item["name"], json.loads(item["arguments"]))  # call ids differ per run
    if kind == "function_call_output":
        return (kind, item["output"])
    return (kind,)


def main() -> int:
    rows = []
    with serve() as sim:
        for wname, (system, tools) in WORKLOADS.items():
            results = {m: asyncio.run(_run(sim, system, tools, o)) for m, o in MODES.items()}
            base = results["stateless"][0]
            contexts = {m: r[2] for m, r in results.items()}
            same = all(c == contexts["stateless"] for c in contexts.values())
            ideal = results["chained"][1]
            for m, (total, _, _) in results.items():
                rows.append((wname, m, total, total / base, total / ideal, same))
    print(f"{'workload':8} {'mode':13} {'bytes':>9} {'vs stateless':>13} {'vs ideal':>9} {'same context':>13}")
    for w, m, total, r_state, r_ideal, same in rows:
        print(f"{w:8} {m:13} {total:9d} {r_state:13.3f} {r_ideal:9.3f} {'yes' if same else 'NO':>13}")
    by = {(w, m): t for w, m, t, *_ in rows}
    w2 = by[("W2", "chained")] / by[("W2", "instructions")]
    worst = max(r_ideal for w, m, _, _, r_ideal, _ in rows if m in ("chained", "conversation"))
    print(
        f"summary: chained/conversation worst {worst:.3f} x ideal; W1 chained {by[('W1', 'chained')] / 1024:.1f} KB vs "
        f"stateless {by[('W1', 'stateless')] / 1024:.1f} KB; W2 chained = {w2:.2f} x an instructions-resending client"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
