"""Bad input to the command: one line on stderr naming the fix, no traceback, nothing half-done."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from _cli_helpers import clean_env, command, geppetto

from geppetto.simulator import Simulator


def one_line_error(res: subprocess.CompletedProcess[str], code: int, *fragments: str) -> None:
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, res.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_save_turn_to_a_folder_or_missing_folder_fails_before_the_inference(
    geppetto_sim: Simulator, tmp_path: Path
) -> None:
    args = ["run", "--profile", "sim", "--base-url", geppetto_sim.openai_url]
    res = geppetto(*args, "--save-turn", str(tmp_path), "Hi", config_dir=tmp_path)
    one_line_error(res, 2, f"--save-turn '{tmp_path}' is a folder", "turn.yaml")
    res = geppetto(*args, "--save-turn", str(tmp_path / "no" / "t.yaml"), "Hi", config_dir=tmp_path)
    one_line_error(res, 1, "the folder", "does not exist")  # a file that cannot be written: 1, as the README says
    assert geppetto_sim.requests == []  # no inference ran, so no answer was lost


def test_prompts_that_are_not_utf8(tmp_path: Path) -> None:
    bad = tmp_path / "prompt.txt"
    bad.write_bytes(b"caf\xe9\n")
    one_line_error(geppetto("run", "--profile", "sim", "--file", str(bad), config_dir=tmp_path), 2, "not UTF-8")
    res = subprocess.run(
        [*command(), "run", "--profile", "sim", "-"],
        input=b"caf\xe9\n",
        capture_output=True,
        env=clean_env(tmp_path),
        timeout=60,
        check=False,
    )
    decoded = subprocess.CompletedProcess(res.args, res.returncode, res.stdout.decode(), res.stderr.decode())
    one_line_error(decoded, 2, "stdin is not UTF-8")


def test_simulate_port_out_of_range(tmp_path: Path) -> None:
    res = geppetto("simulate", "--port", "99999", config_dir=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr and "less than or equal to 65535" in res.stderr


def test_simulate_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*command(), "simulate", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(tmp_path),
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("geppetto simulator on ")
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, err) == (0, "simulator stopped\n")


def test_bad_profile_value_names_the_file_and_setting(tmp_path: Path) -> None:
    (tmp_path / "profiles.yaml").write_text("profiles:\n  p:\n    model: m\n    temperature: hot\n")
    res = geppetto("run", "--profile", "p", "Hi", config_dir=tmp_path)
    one_line_error(res, 2, str(tmp_path / "profiles.yaml"), "profiles.p.temperature is 'hot'")


def test_a_provider_error_is_printed_once_on_stderr(geppetto_sim: Simulator, tmp_path: Path) -> None:
    geppetto_sim.fail_next(401)
    res = geppetto("run", "--profile", "sim", "--base-url", geppetto_sim.openai_url, "Hi", config_dir=tmp_path)
    one_line_error(res, 1, "401")
    assert "error" not in res.stdout


def test_text_streams_before_the_answer_ends(geppetto_sim: Simulator, tmp_path: Path) -> None:
    # The stream stalls after a few events; text must already be on the screen while it does.
    geppetto_sim.fail_next(stall_after=7, stall_seconds=5)
    proc = subprocess.Popen(
        [*command(), "run", "--profile", "sim", "--base-url", geppetto_sim.openai_url, "tell me a long story"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(tmp_path),
    )
    try:
        assert proc.stdout is not None
        seen = b""
        while b"You said" not in seen:
            chunk = proc.stdout.read1(64)
            assert chunk, "the stream ended before any text arrived"
            seen += chunk
        assert proc.poll() is None, "text arrived only after the process ended: it was not streamed"
        started = time.monotonic()
        proc.communicate(timeout=60)
        assert time.monotonic() - started > 1.0  # and the answer was still streaming
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1


def test_inspect_json_has_full_ids_and_the_plan(geppetto_sim: Simulator, tmp_path: Path) -> None:
    saved = tmp_path / "t.yaml"
    res = geppetto(
        "run",
        "--profile",
        "sim",
        "--base-url",
        geppetto_sim.openai_url,
        "--save-turn",
        str(saved),
        "Hi",
        config_dir=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    report = json.loads(geppetto("inspect", "--json", str(saved), config_dir=tmp_path).stdout)
    # Nothing follows the anchor: the engine sends the whole Turn now (never an empty input), and chains on
    # the answer once a prompt follows it. The prediction is the engine's own plan.
    assert [(b["kind"], b["chained"]) for b in report["blocks"]] == [("user", "send"), ("llm_text", "send")]
    chained = report["chained"]
    assert (chained["anchor"], chained["full"], chained["fallback"]) == (None, True, "empty_delta")
    assert chained["sends"] == [b["id"] for b in report["blocks"]]
    assert chained["next"]["anchor"] == report["blocks"][1]["response_id"] and chained["next"]["sends"] == []
    assert len(report["blocks"][0]["id"]) == 36 and report["provider"] == "openai"


def test_a_malformed_turn_file_is_named_in_command_line_terms(tmp_path: Path) -> None:
    """The library's message suggests ``load_turn(..., strict=False)``, which a command-line user cannot pass:
    the command says what to fix in the file instead."""
    turn = tmp_path / "t.yaml"
    turn.write_text("blocks:\n  - kind: telepathy\n    payload: {text: hi}\n")
    res = geppetto("inspect", str(turn), config_dir=tmp_path)
    assert res.returncode == 2
    assert res.stderr.startswith(f"error: {turn}: blocks[0].kind: unknown block kind 'telepathy'; use one of: ")
    assert "strict=False" not in res.stderr and res.stderr.count("\n") == 1
    turn.write_text("blocks:\n  - kind: user\n    payload: {text: hi}\n    colour: blue\n")
    res = geppetto("inspect", str(turn), config_dir=tmp_path)
    assert res.returncode == 2 and "unknown field 'colour'" in res.stderr
    assert "strict=False" not in res.stderr
