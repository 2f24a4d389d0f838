"""Anchor selection time on Turns of 10 to 100,000 blocks, fingerprint checks included (issue 9).

Each Turn is a long tool loop tagged exactly as the engine tags it (``tag_blocks``: response id, block
count and the prefix fingerprint at the end of every response): system, user, then (tool_call from a
response, tool_use from the tool loop) pairs, each tool_use a 200-byte result. Timed, best of several
runs:

- ``select``: what a chained request does before it is sent: one pass that checks every response's
  span and fingerprint (``scan_anchors``), picks the latest valid anchor and takes the blocks after it.
  Blocks remember their wire form from the previous scan, as in a running session, where only the
  blocks new since the last request are hashed from scratch;
- ``cold select``: the same on a fresh clone, whose blocks remember nothing (a Turn just loaded);
- ``edited``: the same after middleware edited the user message at the head of the Turn, so every
  fingerprint check fails and there is no anchor (the worst case: nothing short-circuits).

- ``baseline``: the least any check of the Turn's content must do, one pass hashing each block's
  (remembered) wire form and nothing else; it shows how much of the per-block growth is Python's
  (memory and cache effects on larger heaps), not the algorithm's.

Per-block time at every size shows the growth: constant per block means linear. Run:
`.venv/bin/python bench/anchors.py`. Prints a Markdown table and a last `SUMMARY:` line; exits non-zero
only on an error (a wrong anchor), never on a missed target.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable

from _common import table

from geppetto.providers.openai_responses import blocks_after_response
from geppetto.providers.openai_responses._anchors import _absorb, scan_anchors, tag_blocks
from geppetto.turns import Block, Turn

SIZES = (10, 100, 1_000, 10_000, 100_000)
TARGET_MS_100 = 1.0


def build(n: int) -> tuple[Turn, str]:
    """A tagged tool-loop Turn of ``n`` blocks ending with the tool result after the anchor; and the anchor."""
    turn = Turn()
    turn.append(Block.system("You are a helpful assistant."))
    turn.append(Block.user("start"))
    hasher = scan_anchors(turn).hasher  # a running digest of the prefix, as the engine keeps it
    step = 0
    while len(turn.blocks) < n:
        start = len(turn.blocks)
        turn.append(Block.tool_call(f"call_{step}", "lookup", {"q": step}, item_id=f"fc_{step}"))
        tag_blocks(turn, start, f"resp_{step}", prefix=hasher)
        _absorb(hasher, turn.blocks[start], True)
        turn.append(Block.tool_use(f"call_{step}", f"result {step:06d} " * 14))
        _absorb(hasher, turn.blocks[-1], True)
        step += 1
    return turn, f"resp_{step - 1}"


def select(turn: Turn) -> tuple[str | None, int]:
    """Anchor selection as a chained request runs it: one checked pass, then the delta after the anchor."""
    anchor = scan_anchors(turn).best()
    return anchor, len(blocks_after_response(turn, anchor)) if anchor else len(turn.blocks)


def baseline(turn: Turn) -> str:
    """One pass hashing the wire form of every block: the floor under any content check."""
    h = hashlib.sha256()
    for block in turn.blocks:
        _absorb(h, block, True)
    return h.hexdigest()


def best_of(fn: Callable[[Turn], object], repeat: int, turn: Turn, *, cold: bool = False) -> float:
    """The best time of ``fn(turn)`` over ``repeat`` runs; ``cold`` runs it on a fresh clone each time
    (untimed), whose blocks remember no wire form, as in a Turn just loaded."""
    best = float("inf")
    for _ in range(repeat):
        arg = turn.clone() if cold else turn
        start = time.perf_counter()
        fn(arg)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    rows = []
    per_block: dict[int, float] = {}
    floor_per_block: dict[int, float] = {}
    select_ms: dict[int, float] = {}
    for n in SIZES:
        turn, expected = build(n)
        blocks = len(turn.blocks)
        anchor, delta = select(turn)
        if anchor != expected or delta != 1:
            print(f"ERROR: {blocks} blocks: anchor {anchor} with {delta} delta blocks, expected {expected}")
            return 1
        repeat = max(5, 20_000 // blocks)
        seconds = best_of(select, repeat, turn)
        cold_s = best_of(select, max(3, repeat // 4), turn, cold=True)
        edited = turn.clone()
        edited.blocks[1] = Block.user("start, edited")
        if select(edited)[0] is not None:
            print(f"ERROR: {blocks} blocks: an edit before every anchor was not caught")
            return 1
        edited_s = best_of(select, repeat, edited)
        floor = best_of(baseline, repeat, turn)
        per_block[blocks] = seconds / blocks
        floor_per_block[blocks] = floor / blocks
        select_ms[blocks] = seconds * 1000
        rows.append(
            [
                f"{blocks:,}",
                f"{blocks // 2 - 1:,}",
                f"{seconds * 1000:.3f}",
                f"{seconds / blocks * 1e6:.2f}",
                f"{cold_s * 1000:.3f}",
                f"{edited_s * 1000:.3f}",
                f"{edited_s / blocks * 1e6:.2f}",
                f"{floor / blocks * 1e6:.2f}",
            ]
        )
    print(
        table(
            [
                "blocks",
                "responses",
                "select ms",
                "select us/block",
                "cold select ms",
                "edited ms (no anchor)",
                "edited us/block",
                "baseline us/block",
            ],
            rows,
        )
    )
    ms_100 = select_ms[100]
    growth = per_block[100_000] / per_block[100]
    growth_1k = per_block[100_000] / per_block[1_000]
    floor_growth = floor_per_block[100_000] / floor_per_block[100]
    verdict = "met" if ms_100 <= TARGET_MS_100 else f"missed by {ms_100 / TARGET_MS_100 - 1:.0%}"
    print()
    print(
        f"Target <= {TARGET_MS_100} ms for 100 blocks: {verdict} ({ms_100:.3f} ms). Per-block time at 100,000 "
        f"blocks / at 100 = {growth:.2f}, / at 1,000 = {growth_1k:.2f} (1.00 = linear); the hashing baseline "
        f"grows {floor_growth:.2f}x over the same range."
    )
    print(
        f"SUMMARY: 100 blocks {ms_100:.3f} ms (target <= 1 ms, {verdict}); per-block cost 100k/100 = {growth:.2f}, "
        f"100k/1k = {growth_1k:.2f} (1.00 = linear; hashing baseline 100k/100 = {floor_growth:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
