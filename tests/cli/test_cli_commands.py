"""``geppetto simulate``, ``profiles``, ``demo`` and ``python -m geppetto`` through subprocesses."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _cli_helpers import clean_env, command, geppetto

from geppetto import load_turn


@pytest.fixture
def busy_port() -> Iterator[int]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def test_simulate_on_a_busy_port_says_so(busy_port: int, tmp_path: Path) -> None:
    res = geppetto("simulate", "--port", str(busy_port), config_dir=tmp_path)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == (
        f"error: port {busy_port} on 127.0.0.1 is already in use; pick another with --port (0 picks a free one)\n"
    )


def test_simulate_serves_until_ctrl_c(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*command(), "simulate", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(tmp_path),
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        match = re.fullmatch(r"geppetto simulator on (http://127\.0\.0\.1:\d+)\n", first)
        assert match, first
        reply = httpx.post(
            match.group(1) + "/v1/responses",
            headers={"Authorization": "Bearer sk-test"},
            json={"model": "sim-1", "input": "ping", "stream": False},
            timeout=10,
        )
        assert reply.status_code == 200
        assert reply.json()["output"][0]["content"][0]["text"] == "You said: ping"
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, err) == (0, "simulator stopped\n")


def test_profiles_list_and_show_never_print_keys(tmp_path: Path) -> None:
    (tmp_path / "profiles.yaml").write_text(
        "default: work\nprofiles:\n  work:\n    provider: anthropic\n    model: claude-x\n    api_key_env: WORK_KEY\n"
    )
    secret = "sk-very-secret-value"
    listed = geppetto("profiles", "list", "--json", config_dir=tmp_path, WORK_KEY=secret)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == [
        {
            "name": "sim",
            "provider": "openai-responses",
            "model": "sim-1",
            "mode": "chained",
            "simulator": True,
            "default": False,
        },
        {
            "name": "work",
            "provider": "anthropic",
            "model": "claude-x",
            "api_key_env": "WORK_KEY",
            "simulator": False,
            "default": True,
        },
    ]
    table = geppetto("profiles", "list", config_dir=tmp_path, WORK_KEY=secret)
    assert "work (default)" in table.stdout and "set in $WORK_KEY" in table.stdout
    shown = geppetto("profiles", "show", "work", config_dir=tmp_path, WORK_KEY=secret)
    assert shown.stdout.splitlines() == [
        "name: work",
        "provider: anthropic",
        "model: claude-x",
        "api_key_env: WORK_KEY",
        "simulator: false",
        "key: set in $WORK_KEY",
    ]
    unset = geppetto("profiles", "show", "work", config_dir=tmp_path)
    assert unset.stdout.splitlines()[-1] == "key: 'missing: set WORK_KEY'"
    for res in (listed, table, shown):
        assert secret not in res.stdout + res.stderr
    missing = geppetto("profiles", "show", "nope", config_dir=tmp_path)
    assert (missing.returncode, missing.stderr) == (2, "error: no profile named 'nope'; defined: sim, work\n")


def test_demo_runs_offline_and_compares_modes(tmp_path: Path) -> None:
    res = geppetto("demo", config_dir=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert '→ get_weather({"city": "Paris"})' in res.stdout
    assert '→ calculator({"expression": "17 * 23 + 4"})' in res.stdout
    assert "← calculator: 395" in res.stdout
    pattern = r"│ (stateless|chained|conversation)\s+│ \d+\s+│ (\d+)"
    rows = {m.group(1): int(m.group(2)) for m in re.finditer(pattern, res.stdout)}
    assert set(rows) == {"stateless", "chained", "conversation"}
    assert rows["chained"] < rows["stateless"] and rows["conversation"] < rows["stateless"]
    # The chained run's first request carries no anchor; every later one names the previous response.
    anchors = re.findall(r"│ \d+\s+│ /v1/responses\s+│ \d+\s+│ (\S+)", res.stdout)
    assert len(anchors) == 7 and anchors[0] == "—" and all(a.startswith("resp_") for a in anchors[1:])


def test_python_dash_m_is_the_same_command(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "geppetto", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(tmp_path),
        check=False,
    )
    assert res.returncode == 0
    for name in ("run", "chat", "inspect", "simulate", "demo", "profiles"):
        assert re.search(rf"^  {name}\s", res.stdout, re.MULTILINE), name


def test_chat_resume_continues_where_it_left_off(tmp_path: Path) -> None:
    saved = tmp_path / "chat.yaml"
    first = geppetto("chat", "--profile", "sim", "--resume", str(saved), stdin="hello\n/exit\n", config_dir=tmp_path)
    assert first.returncode == 0, first.stderr
    assert [b.text for b in load_turn(saved).blocks] == ["hello", "You said: hello"]
    second = geppetto(
        "chat", "--profile", "sim", "--resume", str(saved), stdin="again\n/history\n", config_dir=tmp_path
    )
    assert second.returncode == 0, second.stderr
    assert f"resumed 2 blocks from {saved}" in second.stdout
    history = second.stdout.split("assistant> You said: again\n", 1)[1].splitlines()[:4]  # no prompt on a pipe
    assert history == ["you: hello", "assistant: You said: hello", "you: again", "assistant: You said: again"]
    assert [b.text for b in load_turn(saved).blocks] == ["hello", "You said: hello", "again", "You said: again"]


def test_mode_flag_on_another_provider_names_the_fix(tmp_path: Path) -> None:
    res = geppetto("run", "--profile", "sim", "--provider", "anthropic", "--mode", "chained", "hi", config_dir=tmp_path)
    assert (res.returncode, res.stderr) == (
        2,
        "error: --mode applies to the openai-responses and gemini-interactions providers only, not 'anthropic'; "
        "drop --mode\n",
    )
