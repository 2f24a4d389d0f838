"""`geppetto run/chat --mcp` and a profile's `mcp_servers:` offer an MCP server's tools (mcp-server-time)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from _cli_helpers import geppetto

from geppetto import ConfigurationError
from geppetto.profiles import build_engine, load_profiles

pytest.importorskip("mcp_server_time", reason="mcp-server-time is not installed (the dev extra installs it)")
TIME = f"{sys.executable} -m mcp_server_time --local-timezone UTC"


def test_run_with_mcp_calls_the_server_tool(tmp_path: Path) -> None:
    res = geppetto("run", "--profile", "sim", "--mcp", TIME, "get_current_time for 'Asia/Tokyo'", config_dir=tmp_path)
    assert res.returncode == 0, res.stderr
    assert '"timezone": "Asia/Tokyo"' in res.stdout and "get_current_time" in res.stdout


def test_a_profile_lists_mcp_servers(tmp_path: Path) -> None:
    (tmp_path / "profiles.yaml").write_text(
        "profiles:\n"
        "  timed:\n"
        "    provider: openai-chat\n"
        "    model: sim-1\n"
        "    simulator: true\n"
        f"    mcp_servers:\n      - {json.dumps({'command': TIME, 'prefix': 't_'})}\n"
    )
    res = geppetto("run", "--profile", "timed", "--json", "t_get_current_time for 'Europe/Oslo'", config_dir=tmp_path)
    assert res.returncode == 0, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines()]
    results = [e for e in events if e["type"] == "tool_result"]
    assert [r["name"] for r in results] == ["t_get_current_time"] and "Europe/Oslo" in results[0]["result"]


def test_chat_keeps_the_server_for_every_prompt(tmp_path: Path) -> None:
    stdin = "get_current_time for 'Asia/Tokyo'\nget_current_time for 'Europe/Lisbon'\n/exit\n"
    res = geppetto("chat", "--profile", "sim", "--no-store", "--mcp", TIME, config_dir=tmp_path, stdin=stdin)
    assert res.returncode == 0, res.stderr
    assert '"timezone": "Asia/Tokyo"' in res.stdout and '"timezone": "Europe/Lisbon"' in res.stdout


def test_a_server_that_cannot_start_is_one_error_line(tmp_path: Path) -> None:
    res = geppetto("run", "--profile", "sim", "--mcp", str(tmp_path / "no-such-server"), "hi", config_dir=tmp_path)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines() == [
        f"error: MCP server '{tmp_path / 'no-such-server'}' did not start: FileNotFoundError: [Errno 2] "
        f"No such file or directory: '{tmp_path / 'no-such-server'}'"
    ]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{comand: x}", "'comand' is not a setting (did you mean 'command'?); allowed: command, cwd"),
        ("{prefix: x}", "mcp_servers[0] needs either `command` or `url`"),
        ("''", "mcp_servers[0] is ''; write a command line, a URL, or a mapping"),
    ],
)
def test_bad_mcp_server_entries_break_only_their_profile(tmp_path: Path, entry: str, message: str) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(f"profiles:\n  p: {{provider: openai-chat, model: m, mcp_servers: [{entry}]}}\n")
    profiles, _ = load_profiles(path)
    assert message in str(profiles["p"].problem)
    with pytest.raises(ConfigurationError):
        build_engine(profiles["p"], api_key="k")
    assert profiles["sim"].problem is None
