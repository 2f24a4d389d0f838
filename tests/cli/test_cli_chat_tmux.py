"""``geppetto chat`` as a person uses it: typed into a real terminal (tmux), read back from the screen."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _cli_helpers import clean_env, command

from geppetto import BlockKind, load_turn
from geppetto.runtime import get_weather
from geppetto.simulator import Simulator
from geppetto.tools import serialize_result

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install -y tmux)")


class Terminal:
    """One tmux session on a private server socket running a command."""

    def __init__(self, socket: str, cmd: str, env: dict[str, str]) -> None:
        self.base = [str(TMUX), "-L", socket]
        start = [*self.base, "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "220", "-y", "60", cmd]
        for attempt in range(3):  # on a busy machine a new tmux server now and then exits as it starts
            res = subprocess.run(start, env=env, capture_output=True, text=True, timeout=30, check=False)
            if res.returncode == 0:
                return
            if "server exited unexpectedly" not in res.stderr or attempt == 2:
                raise AssertionError(f"tmux could not start: {res.stderr.strip()}")
            self.kill()
            time.sleep(0.5)

    def screen(self) -> str:
        res = subprocess.run(
            [*self.base, "capture-pane", "-p", "-J", "-S", "-200", "-t", "t"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return res.stdout

    def type(self, text: str) -> None:
        subprocess.run([*self.base, "send-keys", "-t", "t", "-l", text], check=True, timeout=30)
        subprocess.run([*self.base, "send-keys", "-t", "t", "Enter"], check=True, timeout=30)

    def wait_for(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared on the screen:\n{self.screen()}")

    def kill(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True, timeout=30, check=False)


@pytest.fixture
def open_terminal(tmp_path: Path) -> Iterator[Callable[..., Terminal]]:
    opened: list[Terminal] = []

    def start(*args: str) -> Terminal:
        chat = " ".join(shlex.quote(part) for part in [*command(), "chat", *args])
        # Keep the pane open after the command ends so its exit status can be read.
        cmd = f"{chat}; echo EXIT-STATUS=$?; sleep 60"
        term = Terminal(f"geppetto-test-{os.getpid()}-{len(opened)}", cmd, clean_env(tmp_path, TERM="xterm"))
        opened.append(term)
        return term

    try:
        yield start
    finally:
        for term in opened:
            term.kill()


@pytest.fixture
def terminal(open_terminal: Callable[..., Terminal]) -> Terminal:
    return open_terminal("--profile", "sim")


def test_chat_prompt_tool_call_inspect_save_exit(terminal: Terminal, tmp_path: Path) -> None:
    terminal.wait_for("you> ")
    terminal.type("What is the weather in Paris?")
    paris = serialize_result(get_weather("Paris"))
    screen = terminal.wait_for(f"Here is what the tools returned. get_weather: {paris}.")
    assert '→ get_weather({"city": "Paris"})' in screen
    assert f"← get_weather: {paris}" in screen

    terminal.type("/inspect")
    screen = terminal.wait_for("the next prompt is sent alone, with previous_response_id=")
    assert "chained: the server holds all 4 blocks" in screen
    for kind in ("user", "tool_call", "tool_use", "llm_text"):
        assert f"│ {kind}" in screen

    saved = tmp_path / "chat.yaml"
    terminal.type(f"/save {saved}")
    terminal.wait_for(f"saved 4 blocks to {saved}")
    turn = load_turn(saved)
    assert [b.kind for b in turn.blocks] == [
        BlockKind.USER,
        BlockKind.TOOL_CALL,
        BlockKind.TOOL_USE,
        BlockKind.LLM_TEXT,
    ]
    assert turn.blocks[0].text == "What is the weather in Paris?"

    # Switching mode keeps the history; the next prompt continues the same conversation.
    terminal.type("/mode stateless")
    terminal.wait_for("mode is now stateless")
    terminal.type("Say hi again")
    terminal.wait_for("You said: Say hi again")
    terminal.type("/history")
    screen = terminal.wait_for("you: Say hi again")
    assert screen.index("you: What is the weather in Paris?") < screen.index("you: Say hi again")

    terminal.type("/exit")
    terminal.wait_for("EXIT-STATUS=0")


def test_ctrl_c_while_streaming_returns_to_the_prompt(
    open_terminal: Callable[..., Terminal], geppetto_sim: Simulator
) -> None:
    geppetto_sim.fail_next(stall_after=3, stall_seconds=30)
    terminal = open_terminal("--profile", "sim", "--base-url", geppetto_sim.openai_url)
    terminal.wait_for("you> ")
    terminal.type("tell me a long story")
    deadline = time.monotonic() + 30
    while not geppetto_sim.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the stream has started and stalls
    subprocess.run([*terminal.base, "send-keys", "-t", "t", "C-c"], check=True, timeout=30)
    terminal.wait_for("(interrupted; the conversation is back to before this prompt)")
    terminal.type("hello")
    terminal.wait_for("You said: hello")
    terminal.type("/history")
    screen = terminal.wait_for("assistant: You said: hello")
    assert "you: tell me a long story" not in screen
    terminal.type("/exit")
    terminal.wait_for("EXIT-STATUS=0")


def test_ctrl_c_at_the_prompt_clears_the_line_and_a_second_exits(terminal: Terminal) -> None:
    terminal.wait_for("you> ")
    terminal.type("Hello")
    # At the prompt again, not just the reply's text: a Ctrl-C before the inference has finished (the
    # session is saved after the last delta is shown) interrupts the prompt instead of the chat.
    terminal.wait_for("You said: Hello\nyou>")
    subprocess.run([*terminal.base, "send-keys", "-t", "t", "-l", "half a line"], check=True, timeout=30)
    subprocess.run([*terminal.base, "send-keys", "-t", "t", "C-c"], check=True, timeout=30)
    terminal.wait_for("(Ctrl-C again or Ctrl-D to exit)\nyou>")
    terminal.type("Still here?")  # the cleared half line is not part of the prompt
    screen = terminal.wait_for("You said: Still here?\nyou>")
    assert "You said: half a line" not in screen
    subprocess.run([*terminal.base, "send-keys", "-t", "t", "C-c"], check=True, timeout=30)
    # Wait for this Ctrl-C's own note and the prompt after it: two Ctrl-C sent back to back can reach
    # Python as one KeyboardInterrupt (its signal handler only sets a flag), which would not exit.
    deadline = time.monotonic() + 30
    while terminal.screen().count("(Ctrl-C again or Ctrl-D to exit)\nyou>") < 2:
        assert time.monotonic() < deadline, terminal.screen()
        time.sleep(0.05)
    subprocess.run([*terminal.base, "send-keys", "-t", "t", "C-c"], check=True, timeout=30)
    screen = terminal.wait_for("EXIT-STATUS=130")
    assert "interrupted; the conversation so far is saved as session " in screen


def test_a_slow_first_token_shows_the_time_waited_then_the_answer(
    open_terminal: Callable[..., Terminal], geppetto_sim: Simulator
) -> None:
    geppetto_sim.fail_next(slow_first_byte=4)
    terminal = open_terminal("--profile", "sim", "--base-url", geppetto_sim.openai_url)
    terminal.wait_for("you> ")
    terminal.type("Hello")
    waiting = re.compile(r"assistant> [|/\\-] \d+s")
    deadline = time.monotonic() + 30
    while not waiting.search(terminal.screen()):  # the indicator, seen before the answer came
        assert "You said: Hello" not in terminal.screen(), "the answer came before any indicator was seen"
        assert time.monotonic() < deadline, terminal.screen()
        time.sleep(0.05)
    screen = terminal.wait_for("You said: Hello\nyou>")
    assert "assistant> You said: Hello" in screen  # the indicator cleared itself before the text
    terminal.type("/exit")
    terminal.wait_for("EXIT-STATUS=0")
