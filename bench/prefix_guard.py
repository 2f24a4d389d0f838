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

Run: ``.venv/bin/python bench/prefix_guard.py [--rounds 200] [--steps 200] [--instructions]``; ``--tiny``
runs a few rounds on a short Turn (the smoke test). The last line starts with ``SUMMARY``.
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
from geppetto.turns import BLOCK_META_PROVIDER

TARGET = 1.3
MODEL = "claude-sonnet-4-5"
TOOLS: list = []  # type: ignore[type-arg]


def _step(turn: Turn, i: int, policy: str | None) -> None:
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
        return callgrind_instructions(sys.executable, __file__, "--child", mode, str(steps), str(n))

    base = count("unguarded", 0)
    return {mode: (count(mode, rounds) - base) / rounds for mode in ("unguarded", "guarded")}


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="tool-loop steps in the Turn (3 blocks each)")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--instructions", action="store_true", help="count instructions (callgrind)")
    parser.add_argument("--tiny", action="store_true", help="a few rounds on a short Turn (the smoke test)")
    args = parser.parse_args()
    steps, rounds = (20, 6) if args.tiny else (args.steps, args.rounds)
    blocks = 2 + 3 * steps
    print(f"# prefix guard, Claude Turn of {blocks} blocks ({steps} thinking), {rounds} rounds; {machine()}")
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
