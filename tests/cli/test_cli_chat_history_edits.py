"""`geppetto chat`'s /rewind N and /fork: the conversation goes back N prompts, or on in a new session that
shares the history so far; both are saved in the store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _cli_helpers import geppetto


@pytest.mark.parametrize("mode", ["chained", "conversation"])
def test_rewind_and_fork_in_a_chat(tmp_path: Path, mode: str) -> None:
    stdin = f"/mode {mode}\nOne\nTwo\n/rewind 1\nThree\n/fork\nFour\n/history\n/rewind x\n/exit\n"
    out = geppetto("chat", "--profile", "sim", config_dir=tmp_path, stdin=stdin)
    assert out.returncode == 0, out.stderr
    assert "rewound 1 prompt with its answer; the last prompt kept: 'One'" in out.stdout
    forked = re.search(r"forked session (\S+) \(kept as it is\) into session (\S+); you continue the fork", out.stdout)
    assert forked, out.stdout
    history = [line.removeprefix("you> ") for line in out.stdout.splitlines() if line.startswith(("you", "assistant"))]
    spoken = [line for line in history if line.startswith(("you: ", "assistant: "))]
    assert spoken == [
        "you: One",
        "assistant: You said: One",
        "you: Three",
        "assistant: You said: Three",
        "you: Four",
        "assistant: You said: Four",
    ]
    assert "usage: /rewind N" in out.stdout
    listed = {s["session_id"] for s in json.loads(geppetto("sessions", "list", "--json", config_dir=tmp_path).stdout)}
    assert listed == {forked.group(1), forked.group(2)}
