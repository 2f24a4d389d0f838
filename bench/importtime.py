"""Import time of geppetto against the peers (issue 8).

Each import runs in a fresh interpreter, `python -X importtime -c "import MODULE"`; the figure is the
cumulative microseconds of the top-level module from the importtime log (interpreter start-up
excluded), plus the wall time of the whole subprocess. Interleaved runs, medians. The subprocesses may
write .pyc files even where PYTHONDONTWRITEBYTECODE is set, so the editable geppetto is measured from
bytecode like the installed peers (pip compiled theirs), not recompiled from source on every run.
Run: `bench/.venv/bin/python bench/importtime.py [RUNS]`; `--instructions` counts each import's instructions
instead (valgrind's callgrind, the same count whatever else the machine does: `python -c "import MODULE"`
less `python -c "pass"`), one run each.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from _common import callgrind_instructions, machine, median, table

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
MODULES = {"geppetto": "geppetto", "pydantic-ai": "pydantic_ai", "openai-agents": "agents", "openai SDK": "openai"}


def once(module: str) -> tuple[float, float]:
    """(import ms from -X importtime, subprocess wall ms) for one fresh interpreter."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True,
        text=True,
        check=True,
        env=ENV,
    )
    wall = (time.perf_counter() - t0) * 1e3
    for line in proc.stderr.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2] == module:
            return int(parts[1]) / 1e3, wall
    raise RuntimeError(f"no importtime line for {module}")


def main(runs: int) -> int:
    imp: dict[str, list[float]] = {n: [] for n in MODULES}
    wall: dict[str, list[float]] = {n: [] for n in MODULES}
    available = {}
    for name, module in MODULES.items():
        try:
            once(module)  # warm the file cache (and .pyc files)
            available[name] = module
        except subprocess.CalledProcessError:
            print(f"skipped {name}: `import {module}` failed; run `sh bench/setup.sh`")
    for _ in range(runs):
        for name, module in available.items():
            i, w = once(module)
            imp[name].append(i)
            wall[name].append(w)
    g = median(imp["geppetto"])
    print(f"# importtime: {runs} interleaved runs per module; {machine()}")
    rows = [[n, f"import {m}", median(imp[n]), median(wall[n]), median(imp[n]) / g] for n, m in available.items()]
    print(table(["package", "statement", "import ms", "process wall ms", "x geppetto"], rows))
    ratios = ", ".join(f"{g / median(imp[n]):.2f}x {n}" for n in available if n != "geppetto")
    print(f"SUMMARY geppetto import = {g:.0f} ms = {ratios} (target <= 0.5x pydantic-ai)")
    return 0


def instructions() -> int:
    """Each import's instructions beside geppetto's (callgrind), in one run."""
    for module in MODULES.values():
        subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, env=ENV, check=False)  # .pyc
    base = callgrind_instructions(sys.executable, "-c", "pass", env=ENV)
    counts: dict[str, int] = {}
    for name, module in MODULES.items():
        try:
            counts[name] = callgrind_instructions(sys.executable, "-c", f"import {module}", env=ENV) - base
        except subprocess.CalledProcessError:
            print(f"skipped {name}: `import {module}` failed; run `sh bench/setup.sh`")
    g = counts["geppetto"]
    print(f"# import instructions (callgrind, interpreter start-up subtracted); {machine()}")
    rows = [[n, f"import {MODULES[n]}", f"{c / 1e6:,.1f}M", f"{g / c:.3f}"] for n, c in counts.items()]
    print(table(["package", "statement", "instructions", "geppetto / it"], rows))
    ratios = ", ".join(f"{g / c:.3f}x {n}" for n, c in counts.items() if n != "geppetto")
    print(f"SUMMARY geppetto import instructions = {g / 1e6:,.1f}M = {ratios} (target <= 0.18x pydantic-ai)")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--instructions"]:
        sys.exit(instructions())
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 9))
