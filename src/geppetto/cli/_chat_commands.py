"""``geppetto chat``'s slash commands (a mixin of :class:`~geppetto.cli._chat.ChatRepl`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from .._exceptions import ConfigurationError, TurnFormatError, UsageError
from ..runtime import Opened
from ..session import Session
from ..turns import BlockKind, Turn, file_attachment, load_turn, save_turn
from ..web import plural
from ._console import check_turn_target
from ._guard import os_error_text
from ._inspect import render_turn

__all__ = ["HELP", "ChatCommands"]

HELP = (
    "commands: /attach FILE · /save FILE · /load FILE · /inspect · /history · /rewind N · /fork · /reset · "
    "/mode stateless|chained|conversation · /help · /exit"
)


class ChatCommands:
    """The slash commands: each takes the text after its name and returns False to end the chat."""

    session: Session | None
    opened: Opened | None
    attached: list[dict[str, Any]]
    console: Console
    runner: asyncio.Runner | None
    commands: dict[str, Callable[[str], bool]]

    def _new_session(self, latest: Turn | None = None, *, session_id: str | None = None) -> Session:
        raise NotImplementedError

    def _same_session(self, latest: Turn | None) -> Session:
        raise NotImplementedError

    def _where(self) -> None:
        raise NotImplementedError

    def command_table(self) -> dict[str, Callable[[str], bool]]:
        return {
            "/attach": self._attach,
            "/save": self._save,
            "/load": self._load,
            "/inspect": self._inspect,
            "/history": self._history,
            "/rewind": self._rewind,
            "/fork": self._fork,
            "/reset": self._reset,
            "/mode": self._mode,
            "/help": self._help,
            "/exit": self._exit,
            "/quit": self._exit,
        }

    def _command(self, line: str) -> bool:
        name, _, arg = line.partition(" ")
        handler = self.commands.get(name)
        if handler is None:
            print(f"unknown command {name}; {HELP}")
            return True
        try:
            return handler(arg.strip())
        except (ConfigurationError, UsageError, TurnFormatError) as exc:
            print(f"error: {exc}")
        except OSError as exc:
            print(f"error: {os_error_text(exc)}")
        return True

    def _latest(self) -> Turn | None:
        assert self.session is not None
        return self.session.latest

    def _save(self, arg: str) -> bool:
        turn = self._latest()
        if not arg:
            print("usage: /save FILE")
        elif turn is None:
            print("nothing to save yet; send a prompt first")
        else:
            check_turn_target(Path(arg))
            save_turn(Path(arg), turn)
            print(f"saved {plural(len(turn.blocks), 'block')} to {arg}")
        return True

    def _load(self, arg: str) -> bool:
        if not arg:
            print("usage: /load FILE")
            return True
        turn = load_turn(Path(arg))
        self.session = self._new_session(turn)
        print(f"loaded {plural(len(turn.blocks), 'block')} from {arg}; the next prompt continues it")
        self._where()
        return True

    def _inspect(self, _arg: str) -> bool:
        turn = self._latest()
        if turn is None:
            print("nothing to inspect yet; send a prompt first")
        else:
            render_turn(turn, self.console)
        return True

    def _history(self, _arg: str) -> bool:
        turn = self._latest()
        for block in turn.blocks if turn is not None else []:
            if block.kind in (BlockKind.USER, BlockKind.LLM_TEXT):
                who = "you" if block.kind is BlockKind.USER else "assistant"
                print(f"{who}: {block.text}")
        return True

    def _reset(self, _arg: str) -> bool:
        self.session = self._new_session()
        print("new conversation")
        self._where()
        return True

    def _mode(self, arg: str) -> bool:
        assert self.opened is not None
        if self.opened.profile.provider != "openai-responses":
            print(f"/mode applies to the openai-responses provider only; this chat uses {self.opened.profile.provider}")
            return True
        if not arg:
            print(f"mode: {self.opened.profile.mode or 'engine default'}; usage: /mode stateless|chained|conversation")
            return True
        self.opened = self.opened.rebuild(mode=arg)
        self.session = self._same_session(self._latest())
        print(f"mode is now {arg}")
        return True

    def _attach(self, arg: str) -> bool:
        if not arg:
            names = ", ".join(str(f.get("filename")) for f in self.attached) or "none"
            print(f"usage: /attach FILE (the file goes with your next prompt); attached now: {names}")
            return True
        file = file_attachment(Path(arg).expanduser())
        self.attached.append(file)
        size = Path(arg).expanduser().stat().st_size
        print(f"attached {file['filename']} ({file['media_type']}, {size} bytes); it goes with your next prompt")
        return True

    def _help(self, _arg: str) -> bool:
        print(HELP)
        return True

    def _exit(self, _arg: str) -> bool:
        return False

    def _rewind(self, arg: str) -> bool:
        assert self.session is not None and self.runner is not None
        if arg and not arg.isdigit():
            print("usage: /rewind N (drop the last N prompts with their answers; N defaults to 1)")
            return True
        n = int(arg or "1")
        turn = self.runner.run(self.session.rewind(n))
        prompts = [b for b in turn.blocks if b.kind is BlockKind.USER]
        last = f"; the last prompt kept: {prompts[-1].text!r}" if prompts else "; no prompt is left"
        print(f"rewound {plural(n, 'prompt')} with {'its answer' if n == 1 else 'their answers'}{last}")
        return True

    def _fork(self, _arg: str) -> bool:
        assert self.session is not None and self.runner is not None
        origin = self.session.session_id
        self.session = self.runner.run(self.session.fork())
        print(f"forked session {origin} (kept as it is) into session {self.session.session_id}; you continue the fork")
        self._where()
        return True
