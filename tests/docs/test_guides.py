"""The guides' first examples (streaming, tools with context and retries, writing a middleware) and the
README's streaming example run as written and print what the pages say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def first_example(text: str, index: int = 0) -> str:
    return str(re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)[index])


def run(tmp_path: Path, code: str) -> list[str]:
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        (
            "streaming.md",
            [
                "-> get_weather({'city': 'Lisbon'})",
                "<- Lisbon: 18°C, light rain",
                "Here is what the tools returned. get_weather: Lisbon: 18°C, light rain.",
                "llm_text",
                "You said: Thanks!",
            ],
        ),
        (
            "tool-context.md",
            [
                "there is no order '123'; order ids look like A-123 (tool order_status asks you to correct the "
                "call and try again)",
                "A-123: shipped (call call_1)",
                "shipped",
            ],
        ),
        ("middleware-guide.md", ["1 blocks"]),
    ],
)
def test_a_guide_example_runs_as_written(tmp_path: Path, page: str, expected: list[str]) -> None:
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    assert run(tmp_path, first_example(text)) == expected


def test_the_tool_context_guide_shows_what_its_example_prints() -> None:
    text = (ROOT / "docs" / "tool-context.md").read_text(encoding="utf-8")
    shown = text.split("prints\n\n```text\n", 1)[1].split("```", 1)[0].splitlines()
    assert shown[1:] == ["A-123: shipped (call call_1)", "shipped"]


def test_the_readme_streams_from_a_model_string(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    use = readme.split("<!-- --8<-- [start:use] -->", 1)[1].split("<!-- --8<-- [end:use] -->", 1)[0]
    code = first_example(use, 1)
    assert "session.stream(" in code and 'gp.Session("sim")' in code
    assert run(tmp_path, code) == ["You said: Tell me about Lisbon", "llm_text"]
