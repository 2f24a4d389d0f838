"""``geppetto chat``: an interactive session with slash commands, on one event loop for its whole life."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from .._exceptions import GeppettoError, InferenceCancelled, StoreError, UsageError
from .._terms import for_cli
from ..middleware import Middleware
from ..runtime import (
    CHAT_ENGINE,
    EngineSettings,
    McpHold,
    Opened,
    choose_profile,
    demo_registry,
    engine_record,
    open_engine,
    recording_engine,
)
from ..session import TURN_META_INFERENCE_USAGE, ExecutionHandle, Session
from ..session.stores import SQLTurnStore, open_store
from ..turns import Turn, file_attachment, load_turn, new_id, save_turn
from ..web import plural
from ._approve import ask_approvals
from ._chat_commands import HELP, ChatCommands
from ._console import cli_middlewares, text_printer
from ._guard import EXIT_INTERRUPTED
from ._terminal import START_ONE, Spinner, read_line, spinning
from ._usage import format_cost, usage_line

__all__ = ["HELP", "ChatRepl"]

PROMPT = "you> "


@contextlib.contextmanager
def _notes_on_their_own_line() -> Iterator[None]:
    """While the chat runs, why the Responses engine resent a whole Turn (a fallback) is said on stderr,
    on a line of its own after the answer, once per reason; no other library line reaches the screen."""
    seen: set[str] = set()

    class Notes(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno != logging.WARNING or "fallback:" not in record.getMessage():
                return
            # the ids that end the warning are for logs; the chat's note is once per reason
            reason = _IDS.sub(")", record.getMessage().removeprefix("responses: "))
            if reason not in seen:
                seen.add(reason)
                _PENDING_NOTES.append(reason)

    logger = logging.getLogger("geppetto.providers.openai_responses")
    handler = Notes()
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        _PENDING_NOTES.clear()


_PENDING_NOTES: list[str] = []
_IDS = re.compile(r"; session=\S+ turn=\S+ inference=\S+\)$")


def _print_notes() -> None:
    for note in _PENDING_NOTES:
        print(f"note: {note}", file=sys.stderr, flush=True)
    _PENDING_NOTES.clear()


ANSWER = "assistant> "


class ChatRepl(ChatCommands):
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
        mcp: tuple[str, ...] = (),
        usage: bool = False,
        yes: bool = False,
        attach: tuple[Path, ...] = (),
    ) -> None:
        self.settings = settings
        self.show_usage = usage
        self.yes = yes
        self.resume = resume
        self.store_target = store
        self.persist = persist
        self.store: SQLTurnStore | None = None
        self.session_id = session_id
        self.continue_last = continue_last
        self.console = Console(highlight=False)
        self.middlewares: list[Middleware] = cli_middlewares(system=system, with_logging=False, with_uppercase=False)
        self.tools = demo_registry() if with_tools else None
        self.mcp = mcp
        self.opened: Opened | None = None
        self.session: Session | None = None
        self._handle: ExecutionHandle | None = None
        self.spinner = Spinner(sys.stdout, ANSWER)
        self.attach = attach
        self.attached: list[dict[str, Any]] = []
        """Files that go with the next prompt (``--attach``, ``/attach``)."""
        self.runner: asyncio.Runner | None = None
        self.commands = self.command_table()

    def _new_session(self, latest: Turn | None = None, *, session_id: str | None = None) -> Session:
        """A session continuing ``latest`` (None: empty) under ``session_id`` (None: a new id)."""
        assert self.opened is not None
        session = Session(
            self.opened.engine,
            tools=self.tools,
            # Each answer records the settings it ran on, /mode changes included, so --continue resumes on them.
            middlewares=[
                recording_engine(lambda: engine_record(self.opened.profile) if self.opened else None),
                *self.middlewares,
            ],
            sinks=[self.spinner.sink, text_printer(sys.stdout)],
            store=self.store,
            session_id=session_id or new_id(),
            record_events=self.store is not None,
            approval=False if self.yes else None,
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
                raise UsageError(f"nothing to continue: no saved session in {store.location}; {START_ONE}")
            wanted = max(infos, key=lambda i: i.updated_at or 0.0).session_id
        if wanted is None:
            return None, None
        wanted = await store.resolve_session(wanted)  # a unique prefix of the id is enough
        latest = await store.load_latest(wanted)  # the latest snapshot alone, whatever the history's length
        if latest is None:
            raise UsageError(f"no session {wanted!r} in {store.location}; list them with `geppetto sessions list`")
        print(f"continuing session {wanted} ({plural(len(latest.blocks), 'block')})")
        return latest, wanted

    def run(self) -> None:
        """The loop; returns on /exit or end of input."""
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())
        with asyncio.Runner() as runner, contextlib.ExitStack() as stack:
            self.runner = runner
            try:
                self.attached = [file_attachment(path) for path in self.attach]  # a bad file fails first
                # What to continue first: a wrong --resume or --session fails before anything is shown.
                stored, session_id = runner.run(self._open_store())
                latest = stored if stored is not None else self._resumed()
                settings = self.settings.resumed(CHAT_ENGINE.get(latest.metadata) if latest is not None else None)
                profile = choose_profile(settings)
                servers = McpHold([*(profile.mcp_servers or []), *self.mcp], self.tools)
                self.tools = runner.run(servers.start())
                stack.callback(lambda: runner.run(servers.stop()))
                with open_engine(profile, self.tools) as opened, _notes_on_their_own_line():
                    self.opened = opened
                    self.console.print(f"geppetto chat · {profile.name} · {profile.provider} {profile.model} · {HELP}")
                    self.session = self._new_session(latest, session_id=session_id)
                    self._where()
                    self._ask_about_waiting(runner)
                    self._loop(runner)
            finally:
                self.close()

    def _loop(self, runner: asyncio.Runner) -> None:
        interrupted = False  # the last thing at the prompt was a Ctrl-C
        while True:
            try:
                line = read_line(PROMPT)
            except EOFError:
                print()
                return
            except KeyboardInterrupt:
                if not interrupted:  # the first clears the line, as in a shell
                    interrupted = True
                    print("\n(Ctrl-C again or Ctrl-D to exit)")
                    continue
                assert self.session is not None
                kept = f"saved as session {self.session.session_id}" if self.store is not None else "not saved"
                print(f"\ninterrupted; the conversation so far is {kept}", file=sys.stderr)
                raise typer.Exit(EXIT_INTERRUPTED) from None
            interrupted = False
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
        if self.resume is None:
            return None
        if not self.resume.exists():
            print(f"{self.resume} does not exist yet; starting a new conversation, saved there after each answer")
            return None
        turn = load_turn(self.resume)
        print(f"resumed {plural(len(turn.blocks), 'block')} from {self.resume}")
        return turn

    async def _infer(self, text: str) -> Turn:
        assert self.session is not None
        self.session.prompt(text, files=self.attached)
        self._handle = self.session.start_inference()
        return await spinning(self.spinner, self._handle.wait())

    async def _settle(self) -> None:
        # Ctrl-C cancelled only the waiter; stop the inference itself and let it unwind.
        if self._handle is not None and self._handle.running:
            self._handle.cancel()
            with contextlib.suppress(InferenceCancelled, asyncio.CancelledError):
                await self._handle.wait()

    def _ask(self, runner: asyncio.Runner, text: str) -> None:
        assert self.session is not None
        before = self.session.latest
        print(ANSWER, end="", flush=True)
        try:
            turn = runner.run(self._infer(text))
            turn = self._ask_about_waiting(runner) or turn
            self.attached = []  # they went with this prompt
            if self.show_usage:
                self._print_usage(turn)
            if self.resume is not None:
                save_turn(self.resume, turn)  # atomic: an interrupted run leaves the previous file intact
        except KeyboardInterrupt:
            runner.run(self._settle())
            self.session = self._same_session(before)
            kept = "; the attached files stay for the next prompt" if self.attached else ""
            print(f"\n(interrupted; the conversation is back to before this prompt{kept})")
        except StoreError as exc:  # the answer is in the session; only saving it failed
            self.attached = []
            print(f"\nerror: {exc}")
        except GeppettoError as exc:
            self.session = self._same_session(before)
            n = len(self.attached)
            dropped = f" (the attached file{' was' if n == 1 else 's were'} dropped)" if n else ""
            self.attached = []
            print(f"\nerror: {for_cli(str(exc))}{dropped}")
        sys.stdout.flush()
        _print_notes()

    def _print_usage(self, turn: Turn) -> None:
        """The status line of ``--usage``: this answer's requests, tokens and cost, and the session's cost."""
        assert self.session is not None
        answer = TURN_META_INFERENCE_USAGE.get(turn.metadata)
        total = self.session.usage
        line = f"this answer: {usage_line(answer)} · " if answer else ""
        self.console.print(f"\n[dim]{line}session: {total.requests} requests, {format_cost(total.cost)}[/dim]")

    def _ask_about_waiting(self, runner: asyncio.Runner) -> Turn | None:
        """Ask y/n for each tool call waiting for approval and resume, until nothing waits. Returns the
        turn the last resume produced (None when nothing waited)."""
        assert self.session is not None
        turn = None
        while calls := self.session.pending_approvals:
            decisions = ask_approvals(calls)
            if decisions is None:
                turn = runner.run(self.session.drop_pending("the user interrupted the approval"))
                print("(the waiting tool calls were dropped)")
                break
            print(ANSWER, end="", flush=True)
            turn = runner.run(self.session.resume(decisions))
        return turn
