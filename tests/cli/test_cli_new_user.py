"""What a new user's second hour met: exit codes and messages as the README states them, one line each,
prompts and progress only on a terminal, and a hint to start with ``geppetto demo``."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import time
from pathlib import Path

from _cli_helpers import clean_env, command, geppetto
from test_cli_errors import one_line_error

from geppetto.simulator import Simulator

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def sim_profile(tmp_path: Path, sim: Simulator, name: str = "simtest", model: str = "sim-1") -> None:
    (tmp_path / "profiles.yaml").write_text(
        f"profiles:\n  {name}:\n    provider: openai-responses\n    model: {model}\n"
        f"    base_url: {sim.openai_url}\n    simulator: true\n",
        encoding="utf-8",
    )


def test_bare_geppetto_hints_the_demo(tmp_path: Path) -> None:
    out = geppetto(config_dir=tmp_path)
    shown = " ".join((out.stdout + out.stderr).split())
    assert "Try `geppetto demo` (offline, no key needed)" in shown
    assert "Traceback" not in out.stderr


def test_a_mistyped_flag_is_one_line_naming_the_help(tmp_path: Path) -> None:
    out = geppetto("run", "--profile", "sim", "--with-tool", "Hi", config_dir=tmp_path)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("error: no such option: --with-tool")
    assert "--with-tools" in out.stderr and "(see 'geppetto run --help')" in out.stderr
    command_typo = geppetto("rnu", config_dir=tmp_path)
    assert command_typo.returncode == 2 and command_typo.stderr.count("\n") == 1
    assert "'run'" in command_typo.stderr
    bad_value = geppetto("simulate", "--port", "99999", config_dir=tmp_path)
    one_line_error(bad_value, 2, "--port", "65535")


def test_the_readme_states_the_exit_codes_these_tests_check() -> None:
    text = " ".join(README.split())
    assert "exit 2 for a usage, configuration or input error" in text
    assert "1 when the provider or the store fails or a file cannot be written" in text


def test_save_turn_into_a_missing_folder_is_a_file_that_cannot_be_written(tmp_path: Path) -> None:
    res = geppetto("run", "--profile", "sim", "--save-turn", str(tmp_path / "no" / "t.yaml"), "Hi", config_dir=tmp_path)
    one_line_error(res, 1, "cannot write --save-turn", "does not exist")


def test_a_base_url_that_is_not_a_url_is_a_usage_error_tried_never(tmp_path: Path) -> None:
    res = geppetto("run", "--profile", "sim", "--base-url", "not-a-url", "Hi", config_dir=tmp_path)
    one_line_error(res, 2, "--base-url 'not-a-url' is not an http(s) URL", "http://127.0.0.1:8765/v1")
    assert "attempts" not in res.stderr
    (tmp_path / "profiles.yaml").write_text("profiles:\n  p:\n    model: m\n    base_url: localhost:11434\n")
    res = geppetto("run", "--profile", "p", "Hi", config_dir=tmp_path)
    one_line_error(res, 2, "profiles.p.base_url 'localhost:11434' is not an http(s) URL")


def test_a_misspelt_profile_key_suggests_the_key_meant(tmp_path: Path) -> None:
    (tmp_path / "profiles.yaml").write_text("profiles:\n  p:\n    provider: openai-responses\n    modle: gpt-4.1\n")
    res = geppetto("run", "--profile", "p", "Hi", config_dir=tmp_path)
    one_line_error(res, 2, "'modle' is not a setting (did you mean 'model'?)")
    (tmp_path / "profiles.yaml").write_text("profiles:\n  p:\n    provider: openai-responses\n    mdoe: chained\n")
    one_line_error(geppetto("run", "--profile", "p", "Hi", config_dir=tmp_path), 2, "(did you mean 'mode'?)")


def test_a_local_base_url_without_a_key_says_any_value_will_do(tmp_path: Path) -> None:
    url = "http://127.0.0.1:11434/v1"
    res = geppetto(
        "run", "--provider", "openai-chat", "--model", "llama3", "--base-url", url, "Hi", config_dir=tmp_path
    )
    one_line_error(res, 2, "no API key", f"for a server at {url} that checks no key, any value will do")
    assert "OPENAI_API_KEY=unused" in res.stderr
    plain = geppetto("run", "--provider", "openai-chat", "--model", "gpt-4.1", "Hi", config_dir=tmp_path)
    one_line_error(plain, 2, "no API key")
    assert "any value" not in plain.stderr  # the official endpoint does check the key


def test_chat_continue_with_nothing_saved_says_so_and_how_to_start(tmp_path: Path) -> None:
    res = geppetto("chat", "--continue", config_dir=tmp_path, stdin="Hi\n")
    one_line_error(res, 2, "nothing to continue: no saved session in", "start one with `geppetto chat`")
    assert "starting a new one" not in res.stdout + res.stderr
    assert "API key" not in res.stderr


def test_chat_on_a_pipe_writes_answers_not_prompts(tmp_path: Path, geppetto_sim: Simulator) -> None:
    sim_profile(tmp_path, geppetto_sim)
    res = geppetto("chat", "--profile", "simtest", "--no-store", config_dir=tmp_path, stdin="Hello\nAgain\n")
    assert res.returncode == 0, res.stderr
    assert "you>" not in res.stdout + res.stderr
    assert "You said: Hello" in res.stdout and "You said: Again" in res.stdout


def test_run_shows_its_wait_on_a_terminal_stderr_only(tmp_path: Path, geppetto_sim: Simulator) -> None:
    sim_profile(tmp_path, geppetto_sim)
    geppetto_sim.fail_next(slow_first_byte=2.5)
    args = [*command(), "run", "--profile", "simtest", "Hello"]
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=follower, env=clean_env(tmp_path), text=True, stdin=subprocess.DEVNULL
    )
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the process closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    stdout, _ = proc.communicate(timeout=30)
    os.close(leader)
    assert proc.returncode == 0
    assert stdout == "You said: Hello\n"  # the answer alone on stdout
    shown = seen.decode()
    assert re.search(r"[|/\\-] [12]s waiting for sim-1", shown), shown
    assert shown.rstrip(" \r").endswith("\r") or shown.endswith("\r")  # cleared before the answer
    geppetto_sim.fail_next(slow_first_byte=1.5)
    piped = geppetto("run", "--profile", "simtest", "Hello", config_dir=tmp_path)
    assert (piped.returncode, piped.stdout, piped.stderr) == (0, "You said: Hello\n", "")


def test_inspect_on_a_file_that_is_not_a_turn_says_so(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# Title\n\n* a list item\n\nSome text: with a colon\n", encoding="utf-8")
    res = geppetto("inspect", str(readme), config_dir=tmp_path)
    one_line_error(res, 2, "is it a turn file?", "--save-turn")
    assert "cut short" not in res.stderr
    image = tmp_path / "picture.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    one_line_error(geppetto("inspect", str(image), config_dir=tmp_path), 2, "not text", "is it a turn file?")
    cut = tmp_path / "cut.json"
    cut.write_text('{"id": "t1", "blocks": [{"kind": "user", "payl', encoding="utf-8")
    one_line_error(geppetto("inspect", str(cut), config_dir=tmp_path), 2, "was the file cut short?")


def test_models_lists_each_profiles_models_from_its_provider(tmp_path: Path, geppetto_sim: Simulator) -> None:
    (tmp_path / "profiles.yaml").write_text(
        "profiles:\n"
        f"  claude:\n    provider: anthropic\n    model: claude-haiku-4-5\n    base_url: {geppetto_sim.url}\n"
        "    api_key_env: SIM_KEY\n"
        "  nokey:\n    provider: gemini\n    model: gemini-2.5-flash\n    api_key_env: UNSET_KEY_VARIABLE\n",
        encoding="utf-8",
    )
    res = geppetto("models", "--json", config_dir=tmp_path, SIM_KEY="k")
    assert res.returncode == 0, res.stderr
    rows = {r["profile"]: r for r in json.loads(res.stdout)}
    assert rows["sim"]["models"][:2] == ["sim-1", "sim-reasoner"] and rows["sim"]["error"] is None
    assert rows["claude"]["models"][0] == "claude-sonnet-4-5" and "claude-haiku-4-5" in rows["claude"]["models"]
    assert rows["nokey"]["models"] == [] and "UNSET_KEY_VARIABLE" in rows["nokey"]["error"]
    table = geppetto("models", config_dir=tmp_path, SIM_KEY="k")
    assert "claude-haiku-4-5*" in table.stdout and "sim-1*" in table.stdout  # the profile's own model marked
    assert "warning: profile 'nokey': no API key" in table.stderr
    gemini = geppetto("models", "--profile", "sim", "--provider", "gemini", "--json", config_dir=tmp_path)
    assert json.loads(gemini.stdout)[0]["models"] == ["gemini-2.5-flash", "gemini-2.5-pro", "gemini-3-pro"]


def test_models_of_one_profile_fail_on_one_line(tmp_path: Path) -> None:
    one_line_error(geppetto("models", "--provider", "anthropic", config_dir=tmp_path), 2, "no API key")
    down = geppetto(
        "models",
        "--provider",
        "anthropic",
        "--base-url",
        "http://127.0.0.1:9",
        config_dir=tmp_path,
        ANTHROPIC_API_KEY="k",
    )
    one_line_error(down, 1, "could not reach http://127.0.0.1:9/v1/models", "check the base URL")


def test_verbose_logs_the_engines_decisions_on_stderr(tmp_path: Path) -> None:
    for args in (("--verbose", "run", "--profile", "sim", "Hi"), ("run", "--profile", "sim", "-v", "Hi")):
        res = geppetto(*args, config_dir=tmp_path)
        assert (res.returncode, res.stdout) == (0, "You said: Hi\n"), res.stderr
        assert "[INFO] geppetto.providers.openai_responses: responses: stateless request" in res.stderr
    quiet = geppetto("run", "--profile", "sim", "Hi", config_dir=tmp_path)
    assert quiet.stderr == ""
