"""Saving and loading large turn files: JSON, YAML streamed from libyaml's events (what load_turn does),
YAML through PyYAML's node graph over libyaml (what it did before; what it still does for a file the
stream does not take), and YAML through the pure-Python classes.

Each case runs in fresh subprocesses: one builds a Turn of N blocks (a user question, a tool call, its
result and an answer, repeated) and saves it, timing the save; another only loads the file, so its peak
memory (ru_maxrss, less what the process held before loading) is the load's own. The load is timed in
wall-clock and in CPU seconds (the CPU time is steadier on a busy machine). The node-graph and pure-Python
cases are timed at the smaller sizes only (they take minutes past them).
Run: `.venv/bin/python bench/turnfiles.py [--million] [--million-yaml]`: --million adds 1,000,000 blocks as
JSON, --million-yaml as streamed YAML too.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SRC = str(Path(__file__).resolve().parent.parent / "src")
FORMATS = ("json", "yaml", "yaml-nodes", "yaml-py")


def _geppetto(fmt: str) -> Any:
    sys.path.insert(0, SRC)
    import geppetto as gp
    from geppetto.turns import _serde_yaml as serde  # the YAML reader and writer turn files use

    if fmt in ("yaml-nodes", "yaml-py"):

        def refuse(*args: Any) -> Any:
            raise serde.NotStreamable("measuring the node graph")

        serde.stream_yaml = refuse
    if fmt == "yaml-py":
        serde._Loader = serde._PyLoader
        serde._Dumper = type("_PyDumper", (serde.yaml.SafeDumper,), {"ignore_aliases": lambda self, data: True})
        serde._Dumper.add_representer(str, serde._str_presenter)
    return gp


def _save(blocks: int, fmt: str, path: Path) -> dict[str, float]:
    """Run in a child: build and save; the figures as JSON."""
    gp = _geppetto(fmt)
    turn = gp.Turn()
    for i in range(blocks // 4):
        turn.append(gp.Block.user(f"What is the weather in city {i}?"))
        turn.append(gp.Block.tool_call(f"call_{i}", "get_weather", {"city": f"city {i}", "units": "C"}))
        turn.append(gp.Block.tool_use(f"call_{i}", f"city {i}: 18C, light rain"))
        turn.append(gp.Block.llm_text(f"It is 18C with light rain in city {i}."))
    start = time.perf_counter()
    gp.save_turn(path, turn)
    return {"save_s": time.perf_counter() - start, "mb": path.stat().st_size / 1e6}


def _load(blocks: int, fmt: str, path: Path) -> dict[str, float]:
    """Run in a child of its own: load only; the figures as JSON."""
    gp = _geppetto(fmt)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start, cpu = time.perf_counter(), time.process_time()
    loaded = gp.load_turn(path, max_bytes=None)
    load, load_cpu = time.perf_counter() - start, time.process_time() - cpu
    assert len(loaded.blocks) == blocks // 4 * 4
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"load_s": load, "load_cpu_s": load_cpu, "peak_mb": (peak - base) / 1e3}


def _child(step: str, blocks: int, fmt: str, path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, step, str(blocks), fmt, str(path)], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] in ("--save", "--load"):
        step = _save if sys.argv[1] == "--save" else _load
        print(json.dumps(step(int(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))))
        return
    million = "--million" in sys.argv or "--million-yaml" in sys.argv
    sizes = [1_000] if "--tiny" in sys.argv else [10_000, 100_000] + ([1_000_000] if million else [])
    print("turn files: save time, file size, load time (wall and CPU) and the load's own peak memory")
    print(
        f"{'blocks':>9} {'format':>10} {'MB':>7} {'save s':>8} {'load s':>8} {'load cpu':>8} "
        f"{'peak MB':>8} {'peak/file':>9}"
    )
    rows: dict[tuple[int, str], dict[str, float]] = {}
    for blocks in sizes:
        for fmt in FORMATS:
            if fmt == "yaml-py" and blocks > 10_000:
                continue
            if fmt == "yaml-nodes" and blocks > 100_000:
                continue
            if fmt == "yaml" and blocks > 100_000 and "--million-yaml" not in sys.argv:
                continue
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / ("t.json" if fmt == "json" else "t.yaml")
                r = _child("--save", blocks, fmt, path)
                r.update(_child("--load", blocks, fmt, path))
            rows[(blocks, fmt)] = r
            print(
                f"{blocks:>9,} {fmt:>10} {r['mb']:>7.1f} {r['save_s']:>8.2f} {r['load_s']:>8.2f} "
                f"{r['load_cpu_s']:>8.2f} {r['peak_mb']:>8.0f} {r['peak_mb'] / r['mb']:>8.1f}x"
            )
    for blocks in sizes:
        j, y = rows[(blocks, "json")], rows.get((blocks, "yaml"))
        if y is None:
            continue
        line = (
            f"SUMMARY {blocks:,} blocks: streamed YAML loads in {y['load_s'] / j['load_s']:.1f}x JSON's wall time, "
            f"{y['load_cpu_s'] / j['load_cpu_s']:.1f}x its CPU time and {y['peak_mb'] / j['peak_mb']:.1f}x its memory"
        )
        nodes = rows.get((blocks, "yaml-nodes"))
        if nodes is not None:
            line += (
                f"; the node graph took {nodes['load_cpu_s'] / j['load_cpu_s']:.1f}x the CPU time and "
                f"{nodes['peak_mb'] / j['peak_mb']:.1f}x the memory"
            )
        print(line)


if __name__ == "__main__":
    main()
