"""Anchor selection time (find_best_anchor, including every fingerprint check) on Turns of 10 to 100,000 blocks.

Each Turn is a tool loop: user, then (tool_call from a response, tool_use from middleware) pairs, every
response tagged as the engine tags it. Run: `.venv/bin/python bench/anchors.py`.
"""

from __future__ import annotations

import sys
import time

from geppetto.providers.openai_responses import find_best_anchor
from geppetto.providers.openai_responses._anchors import fingerprint_step
from geppetto.providers.openai_responses._items import block_identity
from geppetto.turns import BLOCK_META_PREFIX_FINGERPRINT, BLOCK_META_RESPONSE_ID, Block, Turn

SIZES = (10, 100, 1_000, 10_000, 100_000)


def build(n: int) -> Turn:
    """Tag incrementally (what the engine's tag_blocks computes, without re-hashing the prefix each time)."""
    turn = Turn()
    fp = ""
    for block in (Block.system("You are a helpful assistant."), Block.user("start")):
        turn.append(block)
        fp = fingerprint_step(fp, block_identity(block))
    step = 0
    while len(turn.blocks) < n:
        call = turn.append(Block.tool_call(f"call_{step}", "lookup", {"q": step}, item_id=f"fc_{step}"))
        fp = fingerprint_step(fp, block_identity(call))
        BLOCK_META_RESPONSE_ID.set(call.metadata, f"resp_{step}")
        BLOCK_META_PREFIX_FINGERPRINT.set(call.metadata, fp)
        use = turn.append(Block.tool_use(f"call_{step}", f"result {step} " * 20))
        fp = fingerprint_step(fp, block_identity(use))
        step += 1
    return turn


def timed(turn: Turn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        anchor = find_best_anchor(turn)
        best = min(best, time.perf_counter() - start)
    assert anchor is not None
    return best


def main() -> int:
    print(f"{'blocks':>8} {'best ms':>10} {'us/block':>9}")
    per_block = []
    for n in SIZES:
        turn = build(n)
        seconds = timed(turn, repeat=max(3, 2000 // n))
        per_block.append(seconds / len(turn.blocks))
        print(f"{len(turn.blocks):8d} {seconds * 1000:10.3f} {seconds / len(turn.blocks) * 1e6:9.2f}")
    growth = per_block[-1] / per_block[1]
    print(
        f"summary: 100 blocks in {per_block[1] * 100 * 1000:.3f} ms; per-block cost at 100k / at 100 = {growth:.2f} (1.0 = linear)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
