"""`geppetto chat` asks y/n before a tool that needs approval runs (an MCP tool annotated destructive),
denies with a reason, and `--yes` approves every call without asking."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _cli_helpers import geppetto

pytest.importorskip("mcp", reason="the mcp extra is not installed")

SERVER = '''
from mcp.server import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("approval-test")


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def remove_file(path: str) -> str:
    """Remove a file."""
    with open(LOG, "a") as out:
        out.write(f"removed {path}\\n")
    return f"removed {path}"


if __name__ == "__main__":
    server.run("stdio")
'''


def _server(tmp_path: Path) -> tuple[str, Path]:
    log = tmp_path / "ran.log"
    script = tmp_path / "server.py"
    script.write_text(f"LOG = {str(log)!r}\n" + SERVER)
    return f"{sys.executable} {script}", log


def test_chat_asks_before_a_destructive_tool_runs(tmp_path: Path) -> None:
    server, log = _server(tmp_path)
    stdin = "remove_file for 'a.txt'\ny\nremove_file for 'b.txt'\nno, b is needed\n/exit\n"
    res = geppetto("chat", "--profile", "sim", "--no-store", "--mcp", server, config_dir=tmp_path, stdin=stdin)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("[y/N, or a reason to deny]") == 2
    assert 'run remove_file({"path": "a.txt"})?' in res.stdout
    assert log.read_text() == "removed a.txt\n"  # b.txt was denied
    assert "the user denied this tool call: no, b is needed" in res.stdout


def test_chat_yes_approves_without_asking(tmp_path: Path) -> None:
    server, log = _server(tmp_path)
    stdin = "remove_file for 'a.txt'\n/exit\n"
    res = geppetto("chat", "--profile", "sim", "--no-store", "--yes", "--mcp", server, config_dir=tmp_path, stdin=stdin)
    assert res.returncode == 0, res.stderr
    assert "[y/N" not in res.stdout and log.read_text() == "removed a.txt\n"


def test_closing_the_input_at_the_question_drops_the_call(tmp_path: Path) -> None:
    server, log = _server(tmp_path)
    res = geppetto(
        "chat", "--profile", "sim", "--no-store", "--mcp", server, config_dir=tmp_path, stdin="remove_file for 'a'\n"
    )
    assert res.returncode == 0, res.stderr
    assert "(the waiting tool calls were dropped)" in res.stdout and not log.exists()


def test_run_denies_what_needs_approval_unless_yes(tmp_path: Path) -> None:
    server, log = _server(tmp_path)
    res = geppetto("run", "--profile", "sim", "--mcp", server, "remove_file for 'a.txt'", config_dir=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "note: remove_file needs approval and was not run; pass --yes to allow it" in res.stderr
    assert not log.exists() and "geppetto run cannot ask the user" in res.stdout
    res = geppetto("run", "--profile", "sim", "--yes", "--mcp", server, "remove_file for 'a.txt'", config_dir=tmp_path)
    assert res.returncode == 0, res.stderr
    assert log.read_text() == "removed a.txt\n"
