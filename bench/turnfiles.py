"""Saving and loading large turn files: JSON, YAML through libyaml, YAML through the pure-Python classes.

Each case runs in a fresh subprocess, so its peak memory (ru_maxrss) is its own: it builds a Turn of N
blocks (a user question, a tool call, its result and an answer, repeated), saves it, and loads it back,
timing both. The pure-Python YAML classes are timed at the smaller sizes only (they take minutes
past them). Run: `.venv/bin/python bench/turnfiles.py [--million] [--million-yaml]`: --million adds 1,000,000
blocks as JSON, --million-yaml as YAML through libyaml too (about ten minutes more).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parent.parent / "src")


def _case(blocks: int, fmt: str, folder: str) -> dict[str, float]:
    """Run in the child: build, save, load; print the figures as JSON."""
    sys.path.insert(0, SRC)
    import geppetto as gp
    from geppetto.turns import _serde as serde

    if fmt == "yaml-py":
        serde._Loader = serde._PyLoader
        serde._Dumper = type("_PyDumper", (serde.yaml.SafeDumper,), {"ignore_aliases": lambda self, data: True})
        serde._Dumper.add_representer(str, serde._str_presenter)
    turn = gp.Turn()
    for i in range(blocks // 4):
        turn.append(gp.Block.user(f"What is the weather in city {i}?"))
        turn.append(gp.Block.tool_call(f"call_{i}", "get_weather", {"city": f"city {i}", "units": "C"}))
        turn.append(gp.Block.tool_use(f"call_{i}", f"city {i}: 18C, light rain"))
        turn.append(gp.Block.llm_text(f"It is 18C with light rain in city {i}."))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    path = Path(folder) / ("t.json" if fmt == "json" else "t.yaml")
    start = time.perf_counter()
    gp.save_turn(path, turn)
    saved = time.perf_counter() - start
    del turn
    start = time.perf_counter()
    loaded = gp.load_turn(path, max_bytes=None)
    load = time.perf_counter() - start
    assert len(loaded.blocks) == blocks // 4 * 4
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"save_s": saved, "load_s": load, "mb": path.stat().st_size / 1e6, "peak_mb": (peak - base) / 1e3}


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(_case(int(sys.argv[2]), sys.argv[3], sys.argv[4])))
        return
    million = "--million" in sys.argv or "--million-yaml" in sys.argv
    sizes = [10_000, 100_000] + ([1_000_000] if million else [])
    print(
        "turn files: save and load time, file size, and the peak memory that saving and loading added (a subprocess per case)"
    )
    print(f"{'blocks':>9} {'format':>8} {'MB':>7} {'save s':>8} {'load s':>8} {'peak MB':>8} {'peak/file':>9}")
    rows: dict[tuple[int, str], dict[str, float]] = {}
    for blocks in sizes:
        for fmt in ("json", "yaml", "yaml-py"):
            if fmt == "yaml-py" and blocks > 10_000:
                continue
            if fmt == "yaml" and blocks > 100_000 and "--million-yaml" not in sys.argv:
                continue
            with tempfile.TemporaryDirectory() as folder:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", str(blocks), fmt, folder],
                    check=True,
                    capture_output=True,
                    text=True,
                )
            r = rows[(blocks, fmt)] = json.loads(out.stdout)
            print(
                f"{blocks:>9,} {fmt:>8} {r['mb']:>7.1f} {r['save_s']:>8.2f} {r['load_s']:>8.2f} "
                f"{r['peak_mb']:>8.0f} {r['peak_mb'] / r['mb']:>8.1f}x"
            )
    c, py = rows[(10_000, "yaml")], rows[(10_000, "yaml-py")]
    print(
        f"SUMMARY 10,000 blocks: libyaml loads {py['load_s'] / c['load_s']:.1f}x and saves "
        f"{py['save_s'] / c['save_s']:.1f}x faster than the pure-Python YAML classes; JSON loads "
        f"{c['load_s'] / rows[(10_000, 'json')]['load_s']:.0f}x faster than YAML"
    )


if __name__ == "__main__":
    main()
