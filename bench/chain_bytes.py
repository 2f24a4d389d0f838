"""Request bytes per conversation mode of the Responses engine, against the simulator (issue 9).

Workloads:
  W1: a 20-step tool loop (19 tool calls, each answered with a 2 KB result, then a text answer),
      a one-line system prompt, one tool.
  W2: the same loop with a 3 KB system prompt and 5 tools.
Modes: stateless, chained, conversation; and "instructions": chained, but the system prompt re-sent as
`instructions` on every request (what openai-agents and pydantic-ai do).

Bytes are every request body the engine sent (conversation mode includes the POST /conversations that
seeds a conversation). The ideal is, per request, the delta items (blocks the server has not seen) plus
only the fields the API needs on every request: model, tools, previous_response_id or conversation (with
the ids of this run) and stream. The model-visible context is checked equal in every mode: the input
tokens the simulator counted for every request, and the final context items.

The same tool loop also runs on Gemini's Interactions API (`InteractionsEngine`, issue 32), stateless and
chained (`previous_interaction_id` and the steps after the latest proven interaction): its bytes vs
stateless (target <= 0.15), the history the simulator holds at the end checked equal between the modes.


W3 (history edits): a conversation of EDIT_STEPS prompts (512-byte prompts and answers) under a middleware
that edits an old block (the one in the middle of the Turn) before every 5th request. geppetto's chained
mode re-anchors on the latest response before the edit; its conversation mode repairs the conversation in
place (deletes the items after that response: bodiless DELETEs, counted apart). Compared with a full
resend (stateless), and with the peers' options: a conversation re-seeded with the whole Turn after each
edit (what a Conversations-backed session such as openai-agents' must do to change an old item, and what
geppetto did before the repair), and chaining on the latest response without a proof (openai-agents'
`previous_response_id`, pydantic-ai's `openai_previous_response_id="auto"`): fewest bytes, but the model
never reads the edits (its context differs from the Turn).

Run: `.venv/bin/python bench/chain_bytes.py [--steps N] [--edit-steps N] [--only responses|interactions]`
(`--edit-steps` sets EDIT_STEPS). Prints Markdown tables and a last `SUMMARY:` line; exits non-zero only on an
error (a context that differs between modes is one, except for the unproven chain of W3, whose difference is
what it shows), never on a missed target.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from _common import table

from geppetto.providers.gemini import InteractionsEngine
from geppetto.providers.openai_responses import ResponsesEngine, ResponsesMetrics, blocks_to_items, get_state
from geppetto.simulator import Reply, Simulator, ToolCall, serve
from geppetto.turns import BLOCK_META_RESPONSE_ID, TURN_META_USAGE, Block, BlockKind, Turn

STEPS = 20
RESULT = ("weather report " * 140)[:2048]
TARGET_IDEAL = 1.05
TARGET_INSTRUCTIONS = 0.6
TARGET_INTERACTIONS = 0.15


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
MODES: dict[str, dict[str, Any]] = {
    "stateless": {"mode": "stateless"},
    "chained": {"mode": "chained"},
    "conversation": {"mode": "conversation"},
    "instructions": {"mode": "chained", "instructions_mode": True},
}


@dataclass
class Run:
    """One workload in one mode."""

    sent: int = 0
    requests: int = 0
    ideal: int = 0
    input_tokens: list[int] = field(default_factory=list)
    context: list[Any] = field(default_factory=list)


def _size(body: Any) -> int:
    return len(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode())


def _ideal(model: str, delta: list[Block], tools: list[dict[str, Any]], state_field: dict[str, str]) -> int:
    """The smallest body that carries this request: the delta items and the fields needed every time."""
    body: dict[str, Any] = {"model": model, "input": blocks_to_items(delta), "tools": tools, **state_field}
    body["stream"] = True
    return _size(body)


async def _run(sim: Simulator, system: str, tools: list[dict[str, Any]], options: dict[str, Any]) -> Run:
    sim.reset()
    run = Run()
    async with ResponsesEngine("sim-1", api_key="sk-test", base_url=sim.openai_url, tools=tools, **options) as eng:
        turn = Turn()
        turn.append(Block.system(system))
        turn.append(Block.user("Check the weather in twenty cities, one call at a time."))
        seen, previous = 0, ""
        for step in range(STEPS):
            last = step == STEPS - 1
            sim.queue(Reply(text="All done.") if last else Reply(tool_calls=[ToolCall("tool_0", {"city": f"c{step}"})]))
            delta = turn.blocks[seen:]
            turn = await eng.run_inference(turn)
            state = get_state(turn)
            if options["mode"] == "conversation":
                state_field = {"conversation": str(state.conversation_id)} if state else {}
            else:
                state_field = {"previous_response_id": previous} if previous else {}
            run.ideal += _ideal(eng.model, delta, eng.tools, state_field)
            run.input_tokens.append(int((TURN_META_USAGE.get(turn.metadata) or {}).get("input_tokens", 0)))
            previous = str(turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)])
            seen = len(turn.blocks)
            if not last:
                call = turn.blocks[-1]
                assert call.kind is BlockKind.TOOL_CALL, f"step {step}: expected a tool call, got {call.kind}"
                turn.append(Block.tool_use(call.payload["id"], RESULT))
    run.sent = sum(r.size for r in sim.requests)
    run.requests = len(sim.requests)
    run.context = [_norm(i) for i in sim.context_items(previous)]
    if options.get("instructions_mode"):
        run.context.insert(0, ("message", "system", system))
    return run


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


def _verdict(value: float, target: float) -> str:
    return "met" if value <= target else f"missed by {value / target - 1:.1%}"


EDIT_STEPS = 20
EDIT_EVERY = 5
TEXT = ("lorem ipsum dolor sit amet " * 20)[:512]
EDIT_MODES: dict[str, dict[str, Any]] = {
    "geppetto chained (re-anchor)": {"mode": "chained"},
    "geppetto conversation (repair in place)": {"mode": "conversation"},
    "full resend (stateless)": {"mode": "stateless"},
    "peer: re-seed a conversation": {"mode": "conversation", "reseed": True},
    "peer: chain without proof": {"mode": "chained", "blind": True},
}


def _editor(every: int) -> Any:
    """Middleware: before every ``every``-th request, edit the block in the middle of the Turn."""
    calls = 0

    def middleware(next_handler: Any) -> Any:
        async def handler(turn: Turn) -> Turn:
            nonlocal calls
            calls += 1
            if calls % every == 0:
                block = turn.blocks[len(turn.blocks) // 2]
                block.payload["text"] = f"{block.payload['text'][:400]} (edited before request {calls})"
            return await next_handler(turn)

        return handler

    return middleware


def _blind_chain(turn: Turn, state: Any, *, include_system: bool, metrics: Any) -> Any:
    """A peer's chaining: on the latest response, with the blocks after it, whatever changed before it."""
    from geppetto.providers.openai_responses import _request

    last = state.previous_response_id if state else None
    if not last:
        return _request.plan_full(turn, include_system=include_system)
    delta, items = _request._delta(turn, last, include_system)
    return _request.Plan("chained", items, delta, previous_response_id=last)


async def _edit_run(sim: Simulator, options: dict[str, Any], steps: int) -> tuple[Run, int, bool]:
    """W3 in one mode: the run, its bodiless requests (conversation reads and deletions), and whether the
    model's context at the last response equals the Turn."""
    import geppetto as gp
    from geppetto.providers.openai_responses import _request

    sim.reset()
    sim.queue(*(Reply(text=f"{i}: {TEXT}") for i in range(steps)))
    run = Run()
    kept = _request._plan_repair, _request.plan_chained
    if options.get("reseed"):
        _request._plan_repair = lambda *args: None  # type: ignore[assignment]  # a new conversation for every edit
    if options.get("blind"):
        _request.plan_chained = _blind_chain  # type: ignore[assignment]
    try:
        engine = ResponsesEngine("sim-1", api_key="sk-test", base_url=sim.openai_url, mode=options["mode"])
        session = gp.Session(engine, middlewares=[_editor(EDIT_EVERY)])
        session.append(Turn(blocks=[Block.system("You are a helpful assistant.")]))
        for step in range(steps):
            out = await session.run(f"prompt {step}: {TEXT}")
    finally:
        _request._plan_repair, _request.plan_chained = kept  # type: ignore[assignment]
    run.sent = sum(r.size for r in sim.requests)
    run.requests = len(sim.requests)
    bodiless = sum(1 for r in sim.requests if r.method in ("GET", "DELETE"))
    last = str(out.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)])
    first = min(i for i, b in enumerate(out.blocks) if b.metadata.get(str(BLOCK_META_RESPONSE_ID)) == last)
    run.context = [_norm(i) for i in sim.context_items(last)]
    same_context = run.context == [_norm(i) for i in blocks_to_items(out.blocks[:first])]
    return run, bodiless, same_context


def edit_workload(steps: int) -> tuple[str, list[str], list[str]]:
    """W3's table, its summary parts and its errors."""
    rows: list[list[Any]] = []
    errors: list[str] = []
    with serve() as sim:
        runs = {name: asyncio.run(_edit_run(sim, o, steps)) for name, o in EDIT_MODES.items()}
    full = runs["full resend (stateless)"][0].sent
    for name, (run, bodiless, same) in runs.items():
        if not same and not EDIT_MODES[name].get("blind"):
            errors.append(f"W3 {name}: the model-visible context differs from the Turn")
        rows.append([name, run.requests, bodiless, f"{run.sent:,}", f"{run.sent / full:.3f}", "yes" if same else "NO"])
    headers = ["W3 mode", "requests", "of which GET/DELETE", "body bytes", "vs full resend", "context = Turn"]
    chained = runs["geppetto chained (re-anchor)"][0].sent
    repaired = runs["geppetto conversation (repair in place)"][0].sent
    reseeded = runs["peer: re-seed a conversation"][0].sent
    summary = [
        f"W3 chained/full={chained / full:.3f}",
        f"W3 conversation/full={repaired / full:.3f}",
        f"W3 conversation/reseed={repaired / reseeded:.3f}",
    ]
    return table(headers, rows), summary, errors


async def _interactions(sim: Simulator, system: str, tools: list[dict[str, Any]], mode: str) -> tuple[int, Any]:
    """Bytes the Interactions engine sent for the tool loop in ``mode``, and the history the server holds
    at the end (call ids left out: they differ per run)."""
    sim.reset()
    eng = InteractionsEngine(
        "gemini-2.5-flash", api_key="g-test", base_url=sim.url, tools=tools, mode=mode, metrics=ResponsesMetrics()
    )
    async with eng:
        turn = Turn(
            blocks=[Block.system(system), Block.user("Check the weather in twenty cities, one call at a time.")]
        )
        for step in range(STEPS):
            last = step == STEPS - 1
            sim.queue(Reply(text="All done.") if last else Reply(tool_calls=[ToolCall("tool_0", {"city": f"c{step}"})]))
            turn = await eng.run_inference(turn)
            if not last:
                turn.append(Block.tool_use(turn.blocks[-1].payload["id"], RESULT))
    held = sim.held_steps(str(turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]))
    plain = [{k: v for k, v in step.items() if k not in ("id", "call_id")} for step in held]
    return sum(r.size for r in sim.requests), plain


def interactions_rows(sim: Simulator, errors: list[str], summary: list[str]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for wname, (system, tools) in WORKLOADS.items():
        (stateless, held), (chained, chained_held) = (
            asyncio.run(_interactions(sim, system, tools, mode)) for mode in ("stateless", "chained")
        )
        if chained_held != held:
            errors.append(f"{wname} interactions: the server's history differs between stateless and chained")
        ratio = chained / stateless
        rows.append([wname, f"{stateless:,}", f"{chained:,}", f"{ratio:.3f}", f"<= {TARGET_INTERACTIONS}"])
        rows[-1].append(_verdict(ratio, TARGET_INTERACTIONS))
        summary.append(f"{wname} interactions chained/stateless={ratio:.3f}")
    return rows


def main() -> int:
    global STEPS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=STEPS, help="model steps of the tool loop (default 20)")
    parser.add_argument("--edit-steps", type=int, default=EDIT_STEPS, help="prompts of the W3 edit workload")
    parser.add_argument("--only", choices=("responses", "interactions"), help="run one engine's workloads")
    args = parser.parse_args()
    STEPS = args.steps
    if args.only == "interactions":
        errors: list[str] = []
        summary: list[str] = []
        with serve() as sim:
            rows = interactions_rows(sim, errors, summary)
        headers = ["workload", "stateless bytes", "chained bytes", "chained / stateless", "target", "result"]
        print(table(headers, rows))
        print()
        for error in errors:
            print(f"ERROR: {error}")
        print(f"SUMMARY: {'; '.join(summary)}; {'same history' if not errors else 'HISTORY DIFFERS'}")
        return 1 if errors else 0
    return responses_main(args.only is None, args.edit_steps)


def responses_main(with_interactions: bool, steps: int) -> int:
    rows: list[list[Any]] = []
    targets: list[list[Any]] = []
    summary: list[str] = []
    errors: list[str] = []
    with serve() as sim:
        for wname, (system, tools) in WORKLOADS.items():
            runs = {m: asyncio.run(_run(sim, system, tools, o)) for m, o in MODES.items()}
            base = runs["stateless"]
            for mode, run in runs.items():
                same_tokens = run.input_tokens == base.input_tokens
                same_context = run.context == base.context
                if mode != "instructions" and not (same_tokens and same_context):
                    errors.append(f"{wname} {mode}: the model-visible context differs from stateless")
                own_ideal = run.ideal if mode in ("chained", "conversation") else runs["chained"].ideal
                rows.append(
                    [
                        wname,
                        mode,
                        run.requests,
                        f"{run.sent:,}",
                        f"{run.sent / 1024:.1f}",
                        f"{run.sent / base.sent:.3f}",
                        f"{own_ideal:,}",
                        f"{run.sent / own_ideal:.3f}",
                        f"{sum(run.input_tokens):,}",
                        "yes" if same_tokens and same_context else "NO",
                    ]
                )
            for mode in ("chained", "conversation"):
                ratio = runs[mode].sent / runs[mode].ideal
                targets.append(
                    [wname, f"{mode} / ideal", f"{ratio:.3f}", f"<= {TARGET_IDEAL}", _verdict(ratio, TARGET_IDEAL)]
                )
                summary.append(f"{wname} {mode}/ideal={ratio:.3f}")
            summary.append(f"{wname} chained/stateless={runs['chained'].sent / base.sent:.3f}")
            if wname == "W2":
                ratio = runs["chained"].sent / runs["instructions"].sent
                targets.append(
                    [
                        wname,
                        "chained / instructions-resending",
                        f"{ratio:.3f}",
                        f"<= {TARGET_INSTRUCTIONS}",
                        _verdict(ratio, TARGET_INSTRUCTIONS),
                    ]
                )
                summary.append(f"W2 chained/instructions={ratio:.3f}")
        interactions = interactions_rows(sim, errors, summary) if with_interactions else []
    headers = [
        "workload",
        "mode",
        "requests",
        "bytes",
        "KB",
        "vs stateless",
        "ideal bytes",
        "vs ideal",
        "context tokens",
        "same context",
    ]
    print(table(headers, rows))
    print()
    print(table(["workload", "ratio", "value", "target", "result"], targets))
    print()
    if interactions:
        headers = [
            "workload",
            "interactions stateless bytes",
            "chained bytes",
            "chained / stateless",
            "target",
            "result",
        ]
        print(table(headers, interactions))
        print()
    edits, more, edit_errors = edit_workload(steps)
    print(f"W3: {steps} prompts, an old block edited before every {EDIT_EVERY}th request")
    print()
    print(edits)
    print()
    summary += more
    errors += edit_errors
    for error in errors:
        print(f"ERROR: {error}")
    same = "identical context in every mode" if not errors else "CONTEXT DIFFERS"
    print(f"SUMMARY: {'; '.join(summary)}; {same}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
