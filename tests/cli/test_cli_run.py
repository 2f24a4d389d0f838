"""``geppetto run`` and ``geppetto inspect`` through the real console script, against the simulator."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from _cli_helpers import clean_env, command, geppetto

from geppetto import BlockKind, load_turn
from geppetto.runtime import get_weather
from geppetto.simulator import Simulator
from geppetto.tools import serialize_result

PARIS = serialize_result(get_weather("Paris"))
ANSWER = f"Here is what the tools returned. get_weather: {PARIS}."


def _sim_args(sim: Simulator) -> list[str]:
    return ["--profile", "sim", "--base-url", sim.openai_url]


def _chain(sim: Simulator) -> list[tuple[str, bool, int]]:
    """Per request: path, whether it chained on a previous response, number of input items."""
    out = []
    for r in sim.requests:
        body: dict[str, Any] = r.body
        out.append((r.path, body.get("previous_response_id") is not None, len(body["input"])))
    return out


def test_run_streams_a_tool_call_and_chains_the_second_request(geppetto_sim: Simulator, tmp_path: Path) -> None:
    res = geppetto(
        "run", *_sim_args(geppetto_sim), "--with-tools", "What is the weather in Paris?", config_dir=tmp_path
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n") == [
        "",
        '→ get_weather({"city": "Paris"})',
        "",
        f"← get_weather: {PARIS}",
        ANSWER,
        "",
    ]
    # The second request sends only the tool result and chains on the first response.
    assert _chain(geppetto_sim) == [("/v1/responses", False, 1), ("/v1/responses", True, 1)]


def test_json_events_parse_back(geppetto_sim: Simulator, tmp_path: Path) -> None:
    res = geppetto(
        "run", *_sim_args(geppetto_sim), "--with-tools", "--json", "What is the weather in Paris?", config_dir=tmp_path
    )
    assert res.returncode == 0, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines()]
    kinds = [e["type"] for e in events if e["type"] != "text_delta"]
    assert kinds == ["start", "tool_call", "final", "tool_call_started", "tool_result", "start", "final"]
    call = next(e for e in events if e["type"] == "tool_call")
    assert (call["name"], call["args"]) == ("get_weather", {"city": "Paris"})
    result = next(e for e in events if e["type"] == "tool_result")
    assert (result["call_id"], result["result"], result["error"]) == (call["call_id"], PARIS, None)
    deltas = "".join(e["delta"] for e in events if e["type"] == "text_delta")
    assert deltas == events[-1]["text"] == ANSWER
    # Every event of the run, tool events included, belongs to one session and one inference.
    assert len({(e["metadata"]["session_id"], e["metadata"]["inference_id"]) for e in events}) == 1


def test_prompt_from_stdin(geppetto_sim: Simulator, tmp_path: Path) -> None:
    res = geppetto("run", *_sim_args(geppetto_sim), "-", stdin="Say hello\n", config_dir=tmp_path)
    assert (res.returncode, res.stdout, res.stderr) == (0, "You said: Say hello\n", "")


def test_prompt_from_file_and_missing_prompt_file(geppetto_sim: Simulator, tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("From a file\n")
    ok = geppetto("run", *_sim_args(geppetto_sim), "--file", str(prompt), config_dir=tmp_path)
    assert (ok.returncode, ok.stdout) == (0, "You said: From a file\n")
    missing = geppetto("run", "--profile", "sim", "--file", str(tmp_path / "nope.txt"), config_dir=tmp_path)
    assert (missing.returncode, missing.stdout) == (2, "")
    assert missing.stderr == f"error: prompt file {str(tmp_path / 'nope.txt')!r} does not exist; check the path\n"


def test_saved_turn_loads_and_inspect_marks_the_anchor(geppetto_sim: Simulator, tmp_path: Path) -> None:
    saved = tmp_path / "turn.yaml"
    res = geppetto(
        "run",
        *_sim_args(geppetto_sim),
        "--with-tools",
        "--save-turn",
        str(saved),
        "Weather in Paris?",
        config_dir=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    turn = load_turn(saved)
    assert [b.kind for b in turn.blocks] == [
        BlockKind.USER,
        BlockKind.TOOL_CALL,
        BlockKind.TOOL_USE,
        BlockKind.LLM_TEXT,
    ]
    last_response = turn.blocks[-1].metadata["geppetto.response_id@v1"]
    shown = geppetto("inspect", str(saved), config_dir=tmp_path)
    assert shown.returncode == 0, shown.stderr
    rows = [line for line in shown.stdout.splitlines() if line.startswith("│")]
    assert [row.split("│")[2].strip() for row in rows] == ["user", "tool_call", "tool_use", "llm_text"]
    # Nothing follows the anchor: the engine sends the whole Turn (never an empty input); a new prompt chains.
    assert [row.split("│")[7].strip() for row in rows] == ["send", "send", "send", "send"]
    said = " ".join(shown.stdout.split())  # the console wraps long lines
    assert (
        f"chained request now: without previous_response_id, sends all 4 blocks (nothing after anchor "
        f"{last_response} to send)" in said
    )
    assert f"after a new prompt: previous_response_id={last_response}, sends the prompt only" in said
    # ... which is what the engine does: a request on the saved Turn as it is sends all 4 blocks
    from geppetto.providers.openai_responses import ResponsesEngine

    plan = ResponsesEngine("sim-1", api_key="k", base_url=geppetto_sim.openai_url).plan(load_turn(saved))
    assert (plan.previous_response_id, len(plan.blocks), plan.fallback) == (None, 4, "empty_delta")

    # A block appended after the anchor is exactly what a chained request sends.
    turn.append(turn.blocks[0].copy())
    turn.blocks[-1].id = "next-user-block"
    edited = tmp_path / "edited.json"
    from geppetto import save_turn

    save_turn(edited, turn)
    shown = geppetto("inspect", str(edited), config_dir=tmp_path)
    rows = [line for line in shown.stdout.splitlines() if line.startswith("│")]
    assert [row.split("│")[7].strip() for row in rows] == ["", "", "", "anchor", "send"]
    assert f"chained request: previous_response_id={last_response}, sends 1 of 5 blocks" in shown.stdout


def test_middleware_flags(geppetto_sim: Simulator, tmp_path: Path) -> None:
    saved = tmp_path / "turn.yaml"
    res = geppetto(
        "run",
        *_sim_args(geppetto_sim),
        "--system",
        "Be terse.",
        "--with-logging",
        "--with-uppercase",
        "--save-turn",
        str(saved),
        "hello there",
        config_dir=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout == "YOU SAID: HELLO THERE\n"  # the answer once, as the middleware left it
    assert "[INFO] inference start" in res.stderr and "[INFO] inference done" in res.stderr
    turn = load_turn(saved)
    assert [(b.kind, b.text) for b in turn.blocks] == [
        (BlockKind.SYSTEM, "Be terse."),
        (BlockKind.USER, "hello there"),
        (BlockKind.LLM_TEXT, "YOU SAID: HELLO THERE"),
    ]
    first_item = geppetto_sim.requests[0].body["input"][0]
    assert first_item["role"] in ("developer", "system") and "Be terse." in json.dumps(first_item)


def test_no_key_names_the_variable_and_the_offline_profile(tmp_path: Path) -> None:
    where = tmp_path / "profiles.yaml"
    res = geppetto("run", "hello", config_dir=tmp_path)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == (
        f"error: no API key: set OPENAI_API_KEY, define a profile in {where}, or use --profile sim to run offline\n"
    )
    res = geppetto("run", "--provider", "gemini", "hello", config_dir=tmp_path)
    assert res.stderr == (
        f"error: no API key: set GEMINI_API_KEY or GOOGLE_API_KEY, define a profile in {where}, "
        "or use --profile sim to run offline\n"
    )
    res = geppetto("run", "--profile", "work", "hello", config_dir=tmp_path)
    assert (res.returncode, res.stderr) == (
        2,
        "error: no profile named 'work'; defined: sim (see `geppetto profiles list`)\n",
    )


def test_malformed_turn_file_for_inspect(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("blocks: [unclosed\n")
    res = geppetto("inspect", str(bad), config_dir=tmp_path)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1 and str(bad) in res.stderr
    res = geppetto("inspect", str(tmp_path / "missing.yaml"), config_dir=tmp_path)
    assert (res.returncode, res.stdout) == (2, "")
    assert "no such file" in res.stderr and res.stderr.count("\n") == 1


def test_ctrl_c_during_streaming_exits_130_and_saves_nothing(geppetto_sim: Simulator, tmp_path: Path) -> None:
    geppetto_sim.fail_next(stall_after=3, stall_seconds=30)
    saved = tmp_path / "turn.yaml"
    proc = subprocess.Popen(
        [*command(), "run", *_sim_args(geppetto_sim), "--save-turn", str(saved), "tell me a story"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(tmp_path),
    )
    try:
        deadline = time.monotonic() + 30
        while not geppetto_sim.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert geppetto_sim.requests, "the command never reached the simulator"
        time.sleep(0.5)  # let the stream start and stall
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.strip().endswith("interrupted; nothing was saved")
    assert "Traceback" not in err
    assert not saved.exists() and list(tmp_path.glob(".turn.yaml*")) == []


@pytest.mark.parametrize(
    "flags",
    [
        ["--mode", "stateless"],
        ["--mode", "conversation"],
        ["--provider", "openai-chat"],
        ["--provider", "anthropic"],
        ["--provider", "gemini"],
        ["--model", "sim-reasoner"],
    ],
)
def test_every_mode_and_provider_runs_offline(flags: list[str], tmp_path: Path) -> None:
    saved = tmp_path / "t.yaml"
    res = geppetto(
        "run",
        "--profile",
        "sim",
        *flags,
        "--with-tools",
        "--save-turn",
        str(saved),
        "What is the weather in Paris?",
        config_dir=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert f"← get_weather: {PARIS}" in res.stdout
    kinds = [b.kind for b in load_turn(saved).blocks if b.kind is not BlockKind.REASONING]
    assert kinds == [BlockKind.USER, BlockKind.TOOL_CALL, BlockKind.TOOL_USE, BlockKind.LLM_TEXT]


def test_run_attaches_files_to_the_prompt(geppetto_sim: Simulator, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("Paris is sunny.")
    picture = tmp_path / "pixel.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n")
    res = geppetto(
        "run", *_sim_args(geppetto_sim), "--attach", str(notes), "-a", str(picture), "Summarize.", config_dir=tmp_path
    )
    assert res.returncode == 0, res.stderr
    (message,) = geppetto_sim.requests[0].body["input"]
    assert [p["type"] for p in message["content"]] == ["input_text", "input_image", "input_file"]
    assert message["content"][2]["filename"] == "notes.txt"
    assert message["content"][2]["file_data"] == "data:text/plain;base64,UGFyaXMgaXMgc3Vubnku"


def test_run_refuses_a_missing_attachment_before_any_request(geppetto_sim: Simulator, tmp_path: Path) -> None:
    res = geppetto("run", *_sim_args(geppetto_sim), "--attach", str(tmp_path / "nope.pdf"), "Hi", config_dir=tmp_path)
    assert res.returncode != 0
    assert "cannot attach" in res.stderr and "no such file" in res.stderr
    assert geppetto_sim.requests == []


def test_run_refuses_a_folder_as_an_attachment_saying_it_is_one(geppetto_sim: Simulator, tmp_path: Path) -> None:
    res = geppetto("run", *_sim_args(geppetto_sim), "--attach", str(tmp_path), "Hi", config_dir=tmp_path)
    assert res.returncode == 2
    assert res.stderr == f"error: cannot attach {str(tmp_path)!r}: it is a folder; attach the files in it one by one\n"
    assert geppetto_sim.requests == []


def test_the_demo_tools_include_one_that_waits_for_approval(tmp_path: Path) -> None:
    """Approvals can be tried offline: ``book_table`` (a pretend booking) needs the user's yes."""
    asked = "Book a table at Chez Paul for 8pm"
    refused = geppetto("run", "--profile", "sim", "--with-tools", asked, config_dir=tmp_path)
    assert refused.returncode == 0, refused.stderr
    assert "note: book_table needs approval and was not run; pass --yes to allow it" in refused.stderr
    assert "booked a table" not in refused.stdout
    allowed = geppetto("run", "--profile", "sim", "--with-tools", "--yes", asked, config_dir=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    assert "← book_table: booked a table at" in allowed.stdout and "needs approval" not in allowed.stderr
