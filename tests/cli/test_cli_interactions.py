"""``--provider gemini-interactions``: the command line on Gemini's Interactions API (the simulator's)."""

from __future__ import annotations

from pathlib import Path

from _cli_helpers import geppetto

from geppetto.simulator import Simulator


def test_the_cli_runs_on_the_interactions_api(geppetto_sim: Simulator, tmp_path: Path) -> None:
    args = ["--profile", "sim", "--provider", "gemini-interactions", "--base-url", geppetto_sim.url]
    res = geppetto("run", *args, "--mode", "chained", "hello there", config_dir=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "You said: hello there\n"
    assert [r.path for r in geppetto_sim.requests] == ["/v1beta/interactions"]
