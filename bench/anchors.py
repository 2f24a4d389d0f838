"""Anchor-check cost per chained request: the incremental proof against a full pass (issues 9 and 20).

Turns are long tool loops tagged exactly as the engine tags them (``tag_blocks``: response id, block
count and the prefix fingerprint at the end of every response): system, user, then (tool_call from a
response, tool_use from the tool loop) pairs, each tool_use a 200-byte result.

Part 1, by Turn size (100 to 100,000 blocks), best of several runs:

- ``incremental``: what a chained request does now (``scan_anchors(..., incremental=True)``): one
  response and its tool result are appended to a Turn whose first blocks an earlier request proved,
  and only those new blocks are read; the time is the scan after the append;
- ``full``: one pass over the whole Turn checking every response's span and fingerprint, each block's
  wire form remembered (what every chained request did before: the "before" figure);
- ``cold``: the full pass on a fresh clone that remembers nothing (a Turn just loaded);
- ``edited``: the incremental scan after middleware edited the user message at the head, so the proof
  no longer holds and the whole Turn is read, every fingerprint check fails, and no anchor is found.

Part 2, a 10,000-step session: every step appends a response and its tool result and runs the anchor
check as the request before it would. The incremental check runs at every step (timed); the full pass
is timed at every 500th step and its cumulative cost is the sum over all steps of the cost interpolated
between those samples (running it at all 10,000 steps takes minutes).

Part 3, the first chained request on a freshly loaded Turn (issue 36: under 1 ms for 100 blocks): the
engine's planning of a chained request (``_plan.plan_request``: the anchor check, then the delta's
items), timed on a 100-block Turn with a new prompt appended, ``cold`` just after it was loaded (from
a turn file, ``loads_json``; from a SQLite store, ``load_latest`` of a new store object, as a resumed
session reads it) and ``warm`` on a Turn whose earlier blocks the previous request proved (one response,
its tool result and the new prompt appended since). Median and best of 200 loads each.

Run: `.venv/bin/python bench/anchors.py`. Prints Markdown tables and a last `SUMMARY:` line; exits
non-zero only on an error (a wrong anchor, an edit not caught), never on a missed target. ``--tiny``
runs every part at a few hundred blocks and steps (seconds: the smoke test of ``tests/bench``);
``--sizes 1000,4000`` picks part 1's Turn sizes. With
``--memory`` it prints only the bytes per block that what the scans keep adds to a 10,002-block session
(it also runs on older checkouts, through ``PYTHONPATH``, to compare).
"""

from __future__ import annotations

import gc
import inspect
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from _common import table

from geppetto.providers._chain_wire import block_wire
from geppetto.providers.openai_responses import blocks_after_response, find_best_anchor, get_state
from geppetto.providers.openai_responses._answer import tag_blocks
from geppetto.providers.openai_responses._request import plan_request, scan_anchors, wire_for
from geppetto.turns import Block, Turn, copy_json, dumps_json, loads_json
from geppetto.turns._cow import freeze

SIZES = (100, 1_000, 10_000, 100_000)
COLD_BLOCKS = 100
COLD_RUNS = 200
COLD_TARGET_MS = 1.0
SESSION_STEPS = 10_000
SAMPLE_EVERY = 500
TARGET_GROWTH = 1.2
REPEATS = 20_000
"""Runs of the full pass at each size: this many blocks' worth (at least 3)."""
if "--sizes" in sys.argv:  # e.g. --sizes 1000,4000: the Turn sizes of part 1
    SIZES = tuple(int(n) for n in sys.argv[sys.argv.index("--sizes") + 1].split(","))
if "--tiny" in sys.argv:  # every part at a small size: the smoke test, not a figure
    SIZES, COLD_RUNS, SESSION_STEPS, SAMPLE_EVERY, REPEATS = (100, 400), 5, 200, 100, 0


def build(n: int) -> tuple[Turn, str]:
    """A tagged tool-loop Turn of ``n`` blocks ending with the tool result after the anchor; and the anchor."""
    turn = Turn()
    turn.append(Block.system("You are a helpful assistant."))
    turn.append(Block.user("start"))
    hasher = scan_anchors(turn).hasher  # a running digest of the prefix, as the engine keeps it
    step = 0
    while len(turn.blocks) < n:
        step = respond(turn, step, hasher)
        for block in turn.blocks[-2:]:
            data = block_wire(block, wire_for(True))
            if data is not None:
                hasher.update(data)
    return turn, f"resp_{step - 1}"


def respond(turn: Turn, step: int, hasher: object = None) -> int:
    """Append one response (a tool call, tagged) and its tool result; returns the next step number.
    ``hasher`` is the running digest of the Turn before it (the last scan's, as the engine passes it)."""
    start = len(turn.blocks)
    turn.append(Block.tool_call(f"call_{step}", "lookup", {"q": step}, item_id=f"fc_{step}"))
    tag_blocks(turn, start, f"resp_{step}", prefix=hasher)
    turn.append(Block.tool_use(f"call_{step}", f"result {step:06d} " * 14))
    return step + 1


def select(turn: Turn, *, incremental: bool) -> tuple[str | None, int]:
    """Anchor selection as a chained request runs it, then the delta after the anchor."""
    anchor = scan_anchors(turn, incremental=incremental).best()
    return anchor, len(blocks_after_response(turn, anchor)) if anchor else len(turn.blocks)


def best_of(fn: Callable[[], object], repeat: int, before: Callable[[], object] | None = None) -> float:
    """The best time of ``fn()`` over ``repeat`` runs, ``before()`` run untimed ahead of each."""
    best = float("inf")
    for _ in range(repeat):
        if before is not None:
            before()
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def plain_copy(turn: Turn, into: list[Turn]) -> Callable[[], None]:
    """Put a copy of ``turn`` that remembers nothing in ``into[0]`` (untimed, before each run)."""

    def make() -> None:
        into[0] = Turn(blocks=[b.copy() for b in turn.blocks])
        gc.collect()  # the copy's garbage is not the scan's

    return make


def loaded(frozen: Any, into: list[Turn]) -> Callable[[], None]:
    """Put a Turn over the stored versions ``frozen`` in ``into[0]``, as a store's load makes it."""

    def make() -> None:
        into[0] = Turn(frozen.lazy())
        gc.collect()

    return make


def by_size() -> tuple[list[list[str]], dict[int, float], dict[int, float]] | None:
    rows, incremental_ms, full_ms = [], {}, {}
    fresh: list[Turn] = [Turn()]
    for n in SIZES:
        turn, expected = build(n)
        if select(turn, incremental=True) != (expected, 1):  # the first request proves the Turn
            print(f"ERROR: {n} blocks: wrong anchor")
            return None
        held = [int(expected.split("_")[1]) + 1, scan_anchors(turn, incremental=True).hasher]

        def grow(turn: Turn = turn, held: list[object] = held) -> None:
            held[0] = respond(turn, held[0], held[1])  # type: ignore[arg-type]

        def check(turn: Turn = turn, held: list[object] = held) -> None:
            scan = scan_anchors(turn, incremental=True)  # as the engine runs it: its digest goes on to tag_blocks
            held[1] = scan.hasher
            blocks_after_response(turn, scan.best() or "")

        inc = best_of(check, 30, grow)
        scan = scan_anchors(turn, incremental=True)
        if scan.rescanned or scan.best() != f"resp_{held[0] - 1}":  # type: ignore[operator]
            print(f"ERROR: {n} blocks: the incremental check read the whole Turn or found the wrong anchor")
            return None
        repeat = max(3, REPEATS // n)
        full = best_of(lambda turn=turn: select(turn, incremental=False), repeat)
        cold = best_of(lambda: select(fresh[0], incremental=False), max(2, repeat // 4), plain_copy(turn, fresh))
        frozen = freeze(turn.blocks, None)  # the versions a store holds: a Turn just loaded reads them
        public = best_of(lambda: find_best_anchor(fresh[0]), max(2, repeat // 4), loaded(frozen, fresh))
        engine = best_of(lambda: select(fresh[0], incremental=True), max(2, repeat // 4), loaded(frozen, fresh))
        edited = turn.clone()

        def edit(edited: Turn = edited) -> None:
            edited.blocks[1].payload["text"] = f"start, edited {time.perf_counter()}"

        edited_s = best_of(lambda edited=edited: select(edited, incremental=True), max(2, repeat // 2), edit)
        if select(edited, incremental=True)[0] is not None:
            print(f"ERROR: {n} blocks: an edit before every anchor was not caught")
            return None
        incremental_ms[n], full_ms[n] = inc * 1000, full * 1000
        rows.append(
            [
                f"{n:,}",
                f"{inc * 1e6:.1f}",
                f"{full * 1000:.3f}",
                f"{full / inc:,.0f}x",
                f"{cold * 1000:.3f}",
                f"{public * 1000:.3f}",
                f"{engine * 1000:.3f}",
                f"{edited_s * 1000:.3f}",
            ]
        )
    return rows, incremental_ms, full_ms


def session() -> tuple[float, float, dict[int, tuple[float, float]]] | None:
    """A 10,000-step session: cumulative seconds (incremental, full) and per-step figures at a few steps."""
    turn = Turn()
    turn.append(Block.system("You are a helpful assistant."))
    turn.append(Block.user("start"))
    hasher = scan_anchors(turn, incremental=True).hasher
    per_step: list[float] = []
    samples: dict[int, float] = {}
    step = 0
    for i in range(1, SESSION_STEPS + 1):
        step = respond(turn, step, hasher)
        start = time.perf_counter()
        scan = scan_anchors(turn, incremental=True)
        anchor = scan.best()
        per_step.append(time.perf_counter() - start)
        hasher = scan.hasher
        if anchor != f"resp_{step - 1}":
            print(f"ERROR: step {i}: anchor {anchor}")
            return None
        if i in (1, 100, 1_000) or i % SAMPLE_EVERY == 0:
            samples[i] = best_of(lambda: scan_anchors(turn).best(), 2)
    points = sorted(samples)
    full_total = 0.0
    for i in range(1, SESSION_STEPS + 1):
        hi = next(p for p in points if p >= i)
        lo = max((p for p in points if p <= i), default=hi)
        share = 0.0 if hi == lo else (i - lo) / (hi - lo)
        full_total += samples[lo] + (samples[hi] - samples[lo]) * share
    window = {}
    for at in (100, 1_000, 10_000):
        if at > SESSION_STEPS:
            break
        chunk = sorted(per_step[max(0, at - 100) : at])
        window[at] = (chunk[len(chunk) // 2] * 1e6, samples[at])
    return sum(per_step), full_total, window


def memory(steps: int = 5_000) -> float:
    """Bytes per block that what the scans keep adds to a session's Turn: a Turn built and scanned request
    by request, against a plain copy of the same blocks. Runs on older checkouts too (``PYTHONPATH``),
    whose scan has no ``incremental`` switch."""
    incremental = "incremental" in inspect.signature(scan_anchors).parameters

    def scan(turn: Turn) -> object:
        return scan_anchors(turn, incremental=True) if incremental else scan_anchors(turn)

    gc.collect()
    tracemalloc.start()
    turn = Turn()
    turn.append(Block.system("You are a helpful assistant."))
    turn.append(Block.user("start"))
    hasher = scan(turn).hasher  # type: ignore[attr-defined]
    step = 0
    for _ in range(steps):
        step = respond(turn, step, hasher)
        hasher = scan(turn).hasher  # type: ignore[attr-defined]
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    gc.collect()
    tracemalloc.start()
    plain = [Block(b.kind, copy_json(b.payload), b.role, b.id, b.turn_id, dict(b.metadata)) for b in turn.blocks]
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del plain
    return (kept - base) / len(turn.blocks)


def _plan_ms(turn: Turn, anchor: str) -> float:
    """One chained request's planning on ``turn`` (ms); checks it chains on ``anchor`` with a delta."""
    start = time.perf_counter()
    plan = plan_request(turn, "chained", get_state(turn), include_system=True)
    elapsed = (time.perf_counter() - start) * 1000
    if plan.previous_response_id != anchor or plan.full:
        raise SystemExit(f"ERROR: the cold/warm request did not chain on {anchor}: {plan.detail}")
    return elapsed


def cold_first_request() -> dict[str, tuple[float, float]]:
    """Median and best ms of the first chained request's planning: on a Turn loaded from a turn file, on
    one loaded from a SQLite store, and (warm) on one the previous request proved."""
    import asyncio
    import tempfile
    from pathlib import Path

    from geppetto.session.stores import open_store

    turn, anchor = build(COLD_BLOCKS)
    turn.append(Block.user("next question"))
    text = dumps_json(turn)
    figures: dict[str, list[float]] = {"turn file": [], "SQLite store": [], "warm": []}
    for _ in range(COLD_RUNS):
        figures["turn file"].append(_plan_ms(loads_json(text), anchor))

    async def from_store() -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "bench.sqlite"
            writer = open_store(path)
            await writer.save_snapshot("s-bench", loads_json(text))
            writer.close()
            for _ in range(COLD_RUNS):
                reader = open_store(path)
                loaded = await reader.load_latest("s-bench")
                reader.close()
                assert loaded is not None
                figures["SQLite store"].append(_plan_ms(loaded, anchor))

    asyncio.run(from_store())
    warm = loads_json(text)
    hasher = scan_anchors(warm, incremental=True).hasher
    step = int(anchor.split("_")[1]) + 1
    for _ in range(COLD_RUNS):
        start = len(warm.blocks)
        warm.append(Block.tool_call(f"call_{step}", "lookup", {"q": step}, item_id=f"fc_{step}"))
        tag_blocks(warm, start, f"resp_{step}", prefix=hasher)
        warm.append(Block.tool_use(f"call_{step}", f"result {step:06d} " * 14))
        warm.append(Block.user(f"question {step}"))
        plan_start = time.perf_counter()
        plan = plan_request(warm, "chained", get_state(warm), include_system=True)
        figures["warm"].append((time.perf_counter() - plan_start) * 1000)
        if plan.previous_response_id != f"resp_{step}" or plan.full:
            raise SystemExit("ERROR: the warm request did not chain")
        hasher = plan.prefix
        step += 1
    return {name: (sorted(ms)[len(ms) // 2], min(ms)) for name, ms in figures.items()}


def main() -> int:
    if "--cold" in sys.argv:
        return report_cold()
    if "--memory" in sys.argv:
        print(f"SUMMARY: what the anchor scans keep: {memory():.0f} bytes per block (10,002-block session)")
        return 0
    sized = by_size()
    if sized is None:
        return 1
    rows, incremental_ms, full_ms = sized
    print(
        table(
            [
                "blocks",
                "incremental us",
                "full ms (before)",
                "full / incremental",
                "cold full ms",
                "loaded: find_best_anchor ms",
                "loaded: engine ms",
                "edited ms",
            ],
            rows,
        )
    )
    result = session()
    if result is None:
        return 1
    inc_total, full_total, window = result
    print()
    print(
        table(
            ["session step", "blocks", "incremental us (median of 100 steps)", "full ms (before)"],
            [[f"{at:,}", f"{2 + 2 * at:,}", f"{inc:.1f}", f"{full * 1000:.3f}"] for at, (inc, full) in window.items()],
        )
    )
    growth = incremental_ms[SIZES[-1]] / incremental_ms[SIZES[0]]
    full_growth = full_ms[SIZES[-1]] / full_ms[SIZES[0]]
    verdict = "met" if growth <= TARGET_GROWTH else f"missed ({growth:.2f})"
    print()
    print(
        f"{SESSION_STEPS:,}-step session: anchor checks {inc_total:.3f} s cumulative incremental, {full_total:.1f} s with a "
        f"full pass per request (estimated from every {SAMPLE_EVERY}th step), {full_total / inc_total:,.0f}x."
    )
    print()
    cold_verdict = report_cold(summary=False)
    print(
        f"SUMMARY: {cold_verdict}; per-request anchor check {SIZES[0]:,} -> {SIZES[-1]:,} blocks grows {growth:.2f}x incremental (target <= "
        f"{TARGET_GROWTH}, {verdict}) vs {full_growth:,.0f}x for a full pass; {SESSION_STEPS:,}-step session {inc_total:.2f} s "
        f"vs {full_total:.1f} s"
    )
    return 0


def report_cold(*, summary: bool = True) -> Any:
    figures = cold_first_request()
    print(
        table(
            [f"first chained request, {COLD_BLOCKS}-block Turn", "median ms", "best ms"],
            [[name, f"{median:.3f}", f"{best:.3f}"] for name, (median, best) in figures.items()],
        )
    )
    worst = max(median for name, (median, _) in figures.items() if name != "warm")
    verdict = "met" if worst < COLD_TARGET_MS else "missed"
    line = f"cold first chained request {worst:.3f} ms median (target < {COLD_TARGET_MS:g} ms, {verdict})"
    if summary:
        print(f"SUMMARY: {line}, warm {figures['warm'][0]:.3f} ms")
        return 0
    return f"{line}, warm {figures['warm'][0]:.3f} ms"


if __name__ == "__main__":
    sys.exit(main())
