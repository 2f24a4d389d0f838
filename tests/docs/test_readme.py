"""The README stays true: its Python example runs as written, and its quick start names real targets."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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
