"""Every ``bench/*.py`` script runs, in a tiny configuration (seconds each), so that a benchmark cannot rot
unnoticed (a private helper that moved, a flag renamed): each must exit 0 and print its ``SUMMARY`` line.

What a script cannot do here is named with the reason: the peers (openai-agents, pydantic-ai) live only in
the bench venv (``sh bench/setup.sh``), and the scripts skip their part, or are given the flags that leave
it out; callgrind counts are not run (minutes under valgrind; ``--instructions`` modes reuse the same
drivers the timed modes run here). A new script must be added to ``TINY`` below."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

TINY: dict[str, list[str]] = {
    "anchors.py": ["--tiny"],
    "chain_bytes.py": ["--steps", "3", "--edit-steps", "2"],
    "concurrency.py": ["4"],
    "cost.py": [],
    "durable.py": ["2"],
    "importtime.py": ["1"],
    "long_sessions.py": ["--sizes", "24", "--backends", "sqlite,postgres,serve,agents", "--budget", "60"],
    "otel.py": ["1", "--tiny"],
    "overhead.py": ["2", "--only", "b"],
    "prefix_guard.py": ["--tiny"],
    "serve.py": ["--sessions", "2", "--prompts", "1", "--buses", "memory"],
    "server_compaction.py": ["--tiny"],
    "server_requests.py": ["4"],
    "sse_event.py": ["1"],
    "stores.py": ["2"],
    "stream.py": ["1"],
    "structured_output.py": ["4", "1"],
    "turnfiles.py": ["--tiny"],
    "websocket.py": ["--steps", "3", "--repeats", "1", "--rtt", "0"],
    "workloads.py": ["--tiny", "--workloads", "W1", "--drivers", "geppetto"],
}
"""The tiny configuration of each script (its own size flags, or ``--tiny`` where it has none)."""

NEEDS: dict[str, tuple[str, str]] = {
    "stream.py": ("openai", "compares with the openai SDK's stream iterator"),
    "durable.py": ("temporalio", "runs DurableSession (the temporal extra) against a Temporal dev server"),
}
"""Scripts that need a package the dev venv may lack: skipped, with the reason, when it is absent."""


def _scripts() -> list[str]:
    return sorted(p.name for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def test_every_script_has_a_tiny_configuration() -> None:
    missing = sorted(set(_scripts()) - set(TINY))
    assert not missing, f"add the tiny configuration of {', '.join(missing)} to TINY in {__file__}"
    assert not set(TINY) - set(_scripts()), "TINY names a script that is gone"


@pytest.mark.parametrize("script", sorted(TINY))
def test_the_script_runs(script: str, tmp_path: Path) -> None:
    need = NEEDS.get(script)
    if need is not None:
        pytest.importorskip(need[0], reason=f"{script} {need[1]}: not installed here")
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *TINY[script]],
        cwd=BENCH.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a bound that stops a hang on a loaded machine, not a speed assertion
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "SUMMARY" in done.stdout, f"{script} printed no SUMMARY line:\n{done.stdout[-3000:]}"
