"""``geppetto serve -o KEY=VALUE``: an engine option reaches the engine of every served prompt (through the
settings each worker reads from its environment), and a wrong one is refused before anything listens."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import httpx
from server_support import Worker, sse_events, write_sim_profile

from geppetto.runtime import choose_profile
from geppetto.server._main import options_from, parser
from geppetto.server._serve import ServeOptions
from geppetto.simulator import Reply, Simulator


def test_a_served_prompt_runs_on_the_dash_o_options(geppetto_sim: Simulator, tmp_path: Path) -> None:
    write_sim_profile(geppetto_sim)
    geppetto_sim.queue(Reply(text="served"))
    worker = Worker(
        "--profile", "simtest", "--store", str(tmp_path / "s.db"),
        "-o", "compact_threshold=200000", "--option", "prompt_cache_key=served-key",
    )  # fmt: skip
    try:
        sid = httpx.post(worker.url + "/api/sessions", json={}).json()["id"]
        started = httpx.post(f"{worker.url}/api/sessions/{sid}/messages", json={"text": "Hello"}).json()
        with httpx.stream(
            "GET",
            f"{worker.url}/api/sessions/{sid}/events",
            params={"after": started["after"], "until": "finished"},
            timeout=60,
        ) as response:
            last = list(sse_events(response.iter_lines()))[-1]
        assert last["data"]["status"] == "completed"
    finally:
        worker.stop()
    (body,) = [r.body for r in geppetto_sim.requests if r.path == "/v1/responses" and r.method == "POST"]
    assert body["context_management"] == [{"type": "compaction", "compact_threshold": 200000}]
    assert body["prompt_cache_key"] == "served-key"


def test_a_wrong_option_is_refused_before_listening_naming_the_valid_keys() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "geppetto", "serve", "--profile", "sim", "--port", "0", "-o", "compact_treshold=5000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "'compact_treshold' is not an option of openai-responses (did you mean 'compact_threshold'?)" in done.stderr
    assert "delete_replaced_conversations" in done.stderr  # the valid keys are listed


def test_the_server_entry_reads_dash_o_and_a_worker_gets_the_options_back() -> None:
    options = options_from(parser().parse_args(["--profile", "sim", "-o", "background=true", "-o", "max_resumes=2"]))
    assert options.engine.options == {"background": True, "max_resumes": 2}
    # each worker rebuilds the options from JSON in its environment (as app_from_env does)
    raw = json.loads(json.dumps(asdict(options)))
    again = ServeOptions(**{**raw, "engine": type(options.engine)(**raw["engine"])})
    assert choose_profile(again.engine).engine_settings().options() == {
        "mode": "chained",
        "background": True,
        "max_resumes": 2,
    }
