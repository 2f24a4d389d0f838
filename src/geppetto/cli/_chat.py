"""``geppetto chat``: an interactive session with slash commands, on one event loop for its whole life."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console

from .._exceptions import ConfigurationError, GeppettoError, InferenceCancelled, StoreError, TurnFormatError, UsageError
from ..middleware import Middleware
from ..session import ExecutionHandle, Session
from ..session.stores import SQLTurnStore, open_store
from ..turns import BlockKind, Turn, load_turn, new_id, save_turn
from ._demo_tools import demo_registry
from ._guard import EXIT_INTERRUPTED, os_error_text
from ._inspect import render_turn
from ._runtime import (
    EngineSettings,
    Opened,
    check_turn_target,
    choose_profile,
    cli_middlewares,
    open_engine,
    text_printer,
)

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
        store: str | None = None,
        session_id: str | None = None,
        continue_last: bool = False,
        persist: bool = True,
    ) -> None:
        self.settings = settings
        self.resume = resume
        self.store_target = store
        self.persist = persist
        self.store: SQLTurnStore | None = None
        self.session_id = session_id
        self.continue_last = continue_last
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

    def _new_session(self, latest: Turn | None = None, *, session_id: str | None = None) -> Session:
        """A session continuing ``latest`` (None: empty) under ``session_id`` (None: a new id)."""
        assert self.opened is not None
        session = Session(
            self.opened.engine,
            tools=self.tools,
            middlewares=self.middlewares,
            sinks=[text_printer(sys.stdout)],
            store=self.store,
            session_id=session_id or new_id(),
            record_events=self.store is not None,
        )
        if latest is not None:
            session.append(latest)
        return session

    def _same_session(self, latest: Turn | None) -> Session:
        """The current session id again, continuing ``latest`` (after an interrupt, an error or /mode)."""
        assert self.session is not None
        return self._new_session(latest, session_id=self.session.session_id)

    async def _open_store(self) -> tuple[Turn | None, str | None]:
        """Open the store (a named one must work; the default one may be skipped with a warning) and find
        the session to continue: ``--session ID``, ``--continue`` or none. Returns its latest snapshot and id."""
        if not self.persist:
            return None, None
        explicit = self.store_target is not None or self.session_id is not None or self.continue_last
        store = open_store(self.store_target)
        try:
            infos = await store.session_infos()
        except StoreError as exc:
            store.close()
            if explicit:
                raise
            print(f"warning: {exc}; this chat is not saved (pass --no-store to skip the store)")
            return None, None
        self.store = store
        wanted = self.session_id
        if self.continue_last:
            if not infos:
                print(f"no saved session in {store.location} to continue; starting a new one")
            else:
                wanted = max(infos, key=lambda i: i.updated_at or 0.0).session_id
        if wanted is None:
            return None, None
        snapshots = await store.load_session(wanted)
        if not snapshots:
            raise UsageError(f"no session {wanted!r} in {store.location}; list them with `geppetto sessions list`")
        print(f"continuing session {wanted} ({len(snapshots[-1].blocks)} blocks)")
        return snapshots[-1], wanted

    def run(self) -> None:
        """The loop; returns on /exit or end of input."""
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())
        profile = choose_profile(self.settings)
        with open_engine(profile, self.tools) as opened, asyncio.Runner() as runner:
            self.opened = opened
            self.console.print(f"geppetto chat · {profile.name} · {profile.provider} {profile.model} · {HELP}")
            stored, session_id = runner.run(self._open_store())
            self.session = self._new_session(stored or self._resumed(), session_id=session_id)
            self._where()
            try:
                self._loop(runner)
            finally:
                self.close()

    def _loop(self, runner: asyncio.Runner) -> None:
        while True:
            try:
                line = input(PROMPT).strip()
            except EOFError:
                print()
                return
            except KeyboardInterrupt:
                assert self.session is not None
                kept = f"saved as session {self.session.session_id}" if self.store is not None else "not saved"
                print(f"\ninterrupted; the conversation so far is {kept}", file=sys.stderr)
                raise typer.Exit(EXIT_INTERRUPTED) from None
            if not line:
                continue
            if line.startswith("/"):
                if not self._command(line):
                    return
                continue
            self._ask(runner, line)

    def _where(self) -> None:
        assert self.session is not None
        where = f"saved in {self.store.location}" if self.store is not None else "not saved"
        print(f"session {self.session.session_id} · {where}")

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

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
            self.session = self._same_session(before)
            print("\n(interrupted; the conversation is back to before this prompt)")
        except StoreError as exc:  # the answer is in the session; only saving it failed
            print(f"\nerror: {exc}")
        except GeppettoError as exc:
            self.session = self._same_session(before)
            print(f"\nerror: {exc}")

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
            print(f"saved {len(turn.blocks)} blocks to {arg}")
        return True

    def _load(self, arg: str) -> bool:
        if not arg:
            print("usage: /load FILE")
            return True
        turn = load_turn(Path(arg))
        self.session = self._new_session(turn)
        print(f"loaded {len(turn.blocks)} blocks from {arg}; the next prompt continues it")
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

    def _help(self, _arg: str) -> bool:
        print(HELP)
        return True

    def _exit(self, _arg: str) -> bool:
        return False
