"""The README stays true: its Python example runs as written, and its quick start names real targets."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


def test_the_use_example_runs_against_the_simulator_and_chains(tmp_path: Path) -> None:
    blocks = python_blocks()
    assert blocks, "README.md has no ```python example"
    script = tmp_path / "use.py"
    script.write_text(blocks[0], encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "['system', 'user', 'tool_call', 'tool_use', 'llm_text']"
    assert "Lisbon: 18°C, light rain" in lines[1]
    requests = [line for line in lines if line.startswith("/v1/responses")]
    assert len(requests) == 3
    assert requests[0].endswith("previous_response_id: None")
    assert all("previous_response_id: resp_" in line for line in requests[1:])  # chained after the first


def test_the_quick_start_commands_are_make_targets() -> None:
    quick = README.split("## Quick start", 1)[1].split("##", 1)[0]
    commands = re.findall(r"^make (\w+)", quick, flags=re.MULTILINE)
    assert commands == ["demo", "test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in commands:
        assert re.search(rf"^{target}:", makefile, flags=re.MULTILINE), target
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in ci


def _dry_run(target: str, tmp_path: Path) -> str:
    """The commands ``make TARGET`` would run on a fresh clone (its .venv made under ``tmp_path``)."""
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", target, f"VENV={tmp_path / '.venv'}"],
        cwd=ROOT,
        # Run under `make test` (as CI does), make would otherwise say which directory it enters.
        env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_make_demo_installs_only_the_cli_extra_and_says_so(tmp_path: Path) -> None:
    demo = _dry_run("demo", tmp_path)
    installs = [line for line in demo.splitlines() if " install " in line and "--upgrade pip" not in line]
    assert len(installs) == 1 and "-e '.[cli]'" in installs[0], demo
    assert "--quiet" not in installs[0]  # pip's own lines are the progress
    assert "[dev]" not in demo
    assert "installing geppetto with the cli extra" in demo
    assert demo.rstrip().endswith("geppetto demo")
    test = _dry_run("test", tmp_path)
    assert "-e '.[dev]'" in test and "development extra" in test
    quick = " ".join(README.split("## Quick start", 1)[1].split("##", 1)[0].split())
    assert "`make demo` installs only what the demo runs on (the `cli` extra" in quick
    assert "`make test` adds the development extras" in quick


def test_the_cli_extra_is_enough_for_the_demo(without: Any) -> None:
    dev_only = {
        "playwright", "openai", "anthropic", "pytest", "hypothesis", "mcp", "opentelemetry",
        "psycopg", "redis", "nats", "prometheus_client", "ag_ui",
    }  # fmt: skip
    done = without(dev_only, "import sys\nsys.argv = ['geppetto', 'demo']\nfrom geppetto.cli import main\nmain()")
    assert done.returncode == 0, done.stderr
    assert "Bytes sent for the same conversation, per mode" in done.stdout


def test_ci_runs_the_readmes_test_command() -> None:
    quick = README.split("## Quick start", 1)[1].split("##", 1)[0]
    test_command = re.search(r"^(make test)\b", quick, flags=re.MULTILINE)
    assert test_command is not None
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert test_command.group(1) in ci  # a command line of its own, not a comment


def test_the_readme_names_the_new_users_commands() -> None:
    text = " ".join(README.split())
    assert "geppetto models [--profile NAME] [--json]" in text
    assert "geppetto --verbose run" in text
    assert "`sim-reasoner`" in text  # how to see reasoning offline
    assert "OPENAI_API_KEY=unused" in text  # a local server takes any key value
    assert "![The web chat" in README and (ROOT / "docs" / "images" / "chat.png").is_file()
    assert (ROOT / "scripts" / "screenshots.py").is_file()  # how the screenshots are made
