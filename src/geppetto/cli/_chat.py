"""``geppetto chat``: an interactive session with slash commands, on one event loop for its whole life."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from .._exceptions import ConfigurationError, GeppettoError, InferenceCancelled, TurnFormatError
from ..events import TextPrinter
from ..middleware import Middleware
from ..session import ExecutionHandle, Session
from ..turns import BlockKind, Turn, load_turn, save_turn
from ._demo_tools import demo_registry
from ._inspect import render_turn
from ._runtime import EngineSettings, Opened, choose_profile, cli_middlewares, open_engine

__all__ = ["HELP", "ChatRepl"]

HELP = (
    "commands: /save FILE · /load FILE · /inspect · /history · /reset · /mode stateless|chained|conversation · "
    "/help · /exit"
)
PROMPT = "you> "


class ChatRepl:
    """Reads prompts and slash commands from stdin, streams answers to stdout."""

    def __init__(
        self,
        settings: EngineSettings,
        *,
        system: str | None = None,
        with_tools: bool = True,
        resume: Path | None = None,
    ) -> None:
        self.settings = settings
        self.resume = resume
        self.console = Console(highlight=False)
        self.middlewares: list[Middleware] = cli_middlewares(system=system, with_logging=False, with_uppercase=False)
        self.tools = demo_registry() if with_tools else None
        self.opened: Opened | None = None
        self.session: Session | None = None
        self._handle: ExecutionHandle | None = None
        self.commands: dict[str, Callable[[str], bool]] = {
            "/save": self._save,
            "/load": self._load,
            "/inspect": self._inspect,
            "/history": self._history,
            "/reset": self._reset,
            "/mode": self._mode,
            "/help": self._help,
            "/exit": self._exit,
            "/quit": self._exit,
        }

    def _new_session(self, latest: Turn | None = None) -> Session:
        assert self.opened is not None
        session = Session(
            self.opened.engine, tools=self.tools, middlewares=self.middlewares, sinks=[TextPrinter(sys.stdout)]
        )
        if latest is not None:
            session.append(latest)
        return session

    def run(self) -> None:
        """The loop; returns on /exit or end of input."""
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())
        profile = choose_profile(self.settings)
        with open_engine(profile, self.tools) as opened, asyncio.Runner() as runner:
            self.opened = opened
            self.session = self._new_session(self._resumed())
            self.console.print(f"geppetto chat · {profile.name} · {profile.provider} {profile.model} · {HELP}")
            while True:
                try:
                    line = input(PROMPT).strip()
                except EOFError:
                    print()
                    return
                if not line:
                    continue
                if line.startswith("/"):
                    if not self._command(line):
                        return
                    continue
                self._ask(runner, line)

    def _resumed(self) -> Turn | None:
        """The turn saved by an earlier ``--resume`` run of the same file, if there is one."""
        if self.resume is None or not self.resume.exists():
            return None
        turn = load_turn(self.resume)
        print(f"resumed {len(turn.blocks)} blocks from {self.resume}")
        return turn

    async def _infer(self, text: str) -> Turn:
        assert self.session is not None
        self.session.prompt(text)
        self._handle = self.session.start_inference()
        return await self._handle.wait()

    async def _settle(self) -> None:
        # Ctrl-C cancelled only the waiter; stop the inference itself and let it unwind.
        if self._handle is not None and self._handle.running:
            self._handle.cancel()
            with contextlib.suppress(InferenceCancelled, asyncio.CancelledError):
                await self._handle.wait()

    def _ask(self, runner: asyncio.Runner, text: str) -> None:
        assert self.session is not None
        before = self.session.latest
        print("assistant> ", end="", flush=True)
        try:
            turn = runner.run(self._infer(text))
            if self.resume is not None:
                save_turn(self.resume, turn)  # atomic: an interrupted run leaves the previous file intact
        except KeyboardInterrupt:
            runner.run(self._settle())
            self.session = self._new_session(before)
            print("\n(interrupted; the conversation is back to before this prompt)")
        except GeppettoError as exc:
            self.session = self._new_session(before)
            print(f"\nerror: {exc}")

    def _command(self, line: str) -> bool:
        name, _, arg = line.partition(" ")
        handler = self.commands.get(name)
        if handler is None:
            print(f"unknown command {name}; {HELP}")
            return True
        try:
            return handler(arg.strip())
        except (ConfigurationError, TurnFormatError, OSError) as exc:
            print(f"error: {exc}")
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
            save_turn(Path(arg), turn)
            print(f"saved {len(turn.blocks)} blocks to {arg}")
        return True

    def _load(self, arg: str) -> bool:
        if not arg:
            print("usage: /load FILE")
            return True
        turn = load_turn(Path(arg))
        self.session = self._new_session(turn)
        print(f"loaded {len(turn.blocks)} blocks from {arg}; the next prompt continues it")
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
        return True

    def _mode(self, arg: str) -> bool:
        assert self.opened is not None
        if not arg:
            print(f"mode: {self.opened.profile.mode or 'engine default'}; usage: /mode stateless|chained|conversation")
            return True
        self.opened = self.opened.rebuild(mode=arg)
        self.session = self._new_session(self._latest())
        print(f"mode is now {arg}")
        return True

    def _help(self, _arg: str) -> bool:
        print(HELP)
        return True

    def _exit(self, _arg: str) -> bool:
        return False
