"""The prefix guard's cost on a long Claude tool loop (issue 46): a request planned with the guard against
the same request without it, on a Turn of 600 blocks holding 200 thinking blocks.

The Turn is a Claude tool loop as the engine leaves it: a system prompt, a question, then per step a
signed thinking block, a tool call and its result; every thinking block stamped with the prefix it was made
after (``record_response``, what the engine does after each response). Each round appends one more step the
same way, then plans the next request (``build_request``) without the guard (``prefix_policy=None``) and
with it (``"drop"``, the default), alternately, so the machine's drift falls on both alike. CPU time
(``time.process_time``), medians of the rounds; the guarded request is checked to carry every thinking
block. ``--instructions`` counts instructions instead (valgrind's callgrind, the same count whatever else
the machine does): the rounds run in a child per mode, and a child that plans nothing is subtracted.
The timed run also plans on a Turn as a Session derives it for the next prompt (a list over the stored
versions, the guard's progress carried along), guarded and not, alternately.

``--provider gemini`` runs the same loop on Gemini (a signed thought and a call per step, the signatures
stamped by ``gemini._binding.record_response``).

Run: ``.venv/bin/python bench/prefix_guard.py [--rounds 200] [--steps 200] [--instructions] [--provider
gemini]``; ``--tiny`` runs a few rounds on a short Turn (the smoke test). The last line starts with
``SUMMARY``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import callgrind_instructions, machine, median, table

from geppetto import Block, Turn
from geppetto.providers.anthropic import build_messages, build_request
from geppetto.providers.anthropic._binding import record_response
from geppetto.turns import BLOCK_META_PROVIDER, PAYLOAD_THOUGHT_SIGNATURE

TARGET = 1.3
MODEL = "claude-sonnet-4-5"
GEMINI_MODEL = "gemini-2.5-flash"
TOOLS: list = []  # type: ignore[type-arg]
PROVIDER = ["claude"]
"""The provider whose request is planned (``--provider``)."""


def _step(turn: Turn, i: int, policy: str | None) -> None:
    (_gemini_step if PROVIDER[0] == "gemini" else _claude_step)(turn, i, policy)


def _gemini_request(turn: Turn, policy: str | None) -> dict:  # type: ignore[type-arg]
    from geppetto.providers.gemini import build_request as gemini_request

    return gemini_request(turn, tools=TOOLS, thinking_budget=-1, model=GEMINI_MODEL, prefix_policy=policy)


def _gemini_step(turn: Turn, i: int, policy: str | None) -> None:
    """One more Gemini step: the request planned, a signed thought and a call stamped as the engine stamps
    them, and the call's result."""
    from geppetto.providers.gemini import build_contents
    from geppetto.providers.gemini._binding import record_response as gemini_record

    body = _gemini_request(turn, policy)
    start = len(turn.blocks)
    thought = Block.reasoning(f"Step {i}: the user wants the weather; call the tool. " * 4)
    thought.payload[PAYLOAD_THOUGHT_SIGNATURE] = f"sig{i:06d}" * 8
    turn.append(thought)
    turn.append(Block.tool_call(f"call_{i:06d}", "get_weather", {"city": f"city {i}"}))
    origin: dict[int, Block] = {}
    _, contents = build_contents(turn, origin=origin)
    gemini_record(turn, body, turn.blocks[start:], contents, origin)
    turn.append(Block.tool_use(f"call_{i:06d}", f"city {i}: light rain, 18C, wind from the west"))


def _claude_step(turn: Turn, i: int, policy: str | None) -> None:
    """One more step of the loop: the request planned, the response (thinking and a tool call) stamped as
    the engine stamps it, and the tool's result."""
    body = build_request(turn, model=MODEL, tools=TOOLS, thinking_budget=1024, prefix_policy=policy)
    start = len(turn.blocks)
    thinking = Block.reasoning(
        f"Step {i}: the user wants the weather; call the tool. " * 4, signature=f"sig{i:06d}" * 8
    )
    call = Block.tool_call(f"toolu_{i:06d}", "get_weather", {"city": f"city {i}"})
    for block in (thinking, call):
        BLOCK_META_PROVIDER.set(block.metadata, "anthropic")
        turn.append(block)
    origin: dict[int, Block] = {}
    record_response(turn, body, turn.blocks[start:], build_messages(turn, origin), origin, policy=policy or "drop")
    turn.append(Block.tool_use(f"toolu_{i:06d}", f"city {i}: light rain, 18C, wind from the west"))


def build(steps: int) -> Turn:
    turn = Turn()
    turn.append(Block.system("You are a weather assistant. Call get_weather for every city the user names."))
    turn.append(Block.user("What is the weather in these cities?"))
    for i in range(steps):
        _step(turn, i, "drop")
    return turn


def _plan(turn: Turn, policy: str | None) -> float:
    if PROVIDER[0] == "gemini":
        start = time.process_time()
        request = _gemini_request(turn, policy)
        elapsed = time.process_time() - start
        signed = sum(1 for c in request["contents"] for p in c["parts"] if p.get("thought") and "thoughtSignature" in p)
        thoughts = sum(1 for b in turn.blocks if b.kind.value == "reasoning")
        if signed != thoughts:
            raise SystemExit(f"ERROR: the request carried {signed} of {thoughts} signed thoughts")
        return elapsed
    start = time.process_time()
    body = build_request(turn, model=MODEL, tools=TOOLS, thinking_budget=1024, prefix_policy=policy)
    elapsed = time.process_time() - start
    sent = sum(1 for m in body["messages"] for c in m["content"] if c.get("type") == "thinking")
    thinking = sum(1 for b in turn.blocks if b.kind.value == "reasoning")
    if sent != thinking:
        raise SystemExit(f"ERROR: the request carried {sent} of {thinking} thinking blocks")
    return elapsed


def timed(steps: int, rounds: int) -> dict[str, list[float]]:
    turn = build(steps)
    figures: dict[str, list[float]] = {"unguarded": [], "guarded": []}
    for r in range(rounds):
        _step(turn, steps + r, "drop")  # the new step, stamped as the engine does
        order = ("unguarded", "guarded") if r % 2 == 0 else ("guarded", "unguarded")
        for mode in order:
            figures[mode].append(_plan(turn, None if mode == "unguarded" else "drop"))
    return figures


def derived(steps: int, rounds: int) -> dict[str, list[float]]:
    """The same planning on a Turn as a Session derives it for the next prompt: a list over the stored
    (frozen) versions, the guard's progress carried along (``_history._carried``) for the guarded mode."""
    from geppetto.session._history import _carried
    from geppetto.turns._cow import freeze

    turn = build(steps)
    _plan(turn, "drop")  # the guard's pass, whose progress the derived Turn carries
    figures: dict[str, list[float]] = {"unguarded": [], "guarded": []}
    for r in range(rounds):
        frozen = freeze(turn.blocks, None)
        for mode in ("unguarded", "guarded") if r % 2 == 0 else ("guarded", "unguarded"):
            fresh = Turn(frozen.lazy(_carried(turn) if mode == "guarded" else None))
            figures[mode].append(_plan(fresh, None if mode == "unguarded" else "drop"))
    return figures


def _child(mode: str, steps: int, rounds: int) -> None:
    """Callgrind's child: the Turn built, then ``rounds`` steps each planned in ``mode`` (none when 0)."""
    turn = build(steps)
    for r in range(rounds):
        _step(turn, steps + r, "drop")
        _plan(turn, None if mode == "unguarded" else "drop")


def instructions(steps: int, rounds: int) -> dict[str, float]:
    def count(mode: str, n: int) -> int:
        return callgrind_instructions(sys.executable, __file__, "--child", mode, str(steps), str(n), PROVIDER[0])

    base = count("unguarded", 0)
    return {mode: (count(mode, rounds) - base) / rounds for mode in ("unguarded", "guarded")}


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        PROVIDER[0] = sys.argv[5]
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="tool-loop steps in the Turn (3 blocks each)")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--instructions", action="store_true", help="count instructions (callgrind)")
    parser.add_argument("--tiny", action="store_true", help="a few rounds on a short Turn (the smoke test)")
    parser.add_argument("--provider", choices=("claude", "gemini"), default="claude")
    args = parser.parse_args()
    PROVIDER[0] = args.provider
    steps, rounds = (20, 6) if args.tiny else (args.steps, args.rounds)
    blocks = 2 + 3 * steps
    name = "Gemini" if args.provider == "gemini" else "Claude"
    print(f"# prefix guard, {name} Turn of {blocks} blocks ({steps} thinking), {rounds} rounds; {machine()}")
    if args.instructions:
        if shutil.which("valgrind") is None:
            print("SUMMARY: skipped: --instructions needs valgrind (callgrind), which is not installed")
            return 0
        counts = instructions(steps, rounds)
        rows = [[mode, f"{c / 1e3:,.0f}k"] for mode, c in counts.items()]
        print(table(["request planned", "instructions"], rows))
        ratio = counts["guarded"] / counts["unguarded"]
        what = "instructions"
    else:
        figures = timed(steps, rounds)
        rows = [[mode, f"{median(ms) * 1e3:.3f}", f"{min(ms) * 1e3:.3f}"] for mode, ms in figures.items()]
        print(table(["request planned", "CPU ms (median)", "best ms"], rows))
        ratio = median(figures["guarded"]) / median(figures["unguarded"])
        what = "CPU"
        lazy = derived(steps, rounds)
        rows = [[mode, f"{median(ms) * 1e3:.3f}", f"{min(ms) * 1e3:.3f}"] for mode, ms in lazy.items()]
        print(table(["request planned on a Turn a Session derived", "CPU ms (median)", "best ms"], rows))
        what += f"; on a derived Turn {median(lazy['guarded']) / median(lazy['unguarded']):.2f}x"
    verdict = "met" if ratio <= TARGET else "missed"
    print(
        f"SUMMARY: guarded / unguarded request {ratio:.2f}x {what} at {blocks} blocks (target <= {TARGET}x, {verdict})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
