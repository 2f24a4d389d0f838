"""``geppetto run``: one inference through the tool loop, streamed to the terminal or as JSON lines."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from .._exceptions import UsageError
from ..events import EventSink, JsonLinesPrinter
from ..runtime import EngineSettings, choose_profile, demo_registry, mcp_tools, open_engine
from ..session import Session, UsageLimits
from ..turns import PAYLOAD_CITATIONS, BlockKind, Turn, citation_sources, file_attachment, save_turn
from ._console import check_turn_target, cli_middlewares, sources_text, text_printer
from ._terminal import Spinner, spinning
from ._usage import unpriced_hint, usage_line

__all__ = ["RunOptions", "read_prompt", "run_command"]


@dataclass
class RunOptions:
    """Everything ``geppetto run`` was asked to do."""

    settings: EngineSettings
    system: str | None = None
    with_tools: bool = False
    with_logging: bool = False
    with_uppercase: bool = False
    json_events: bool = False
    save_turn: Path | None = None
    mcp: tuple[str, ...] = ()
    usage: bool = False
    limits: str | None = None
    yes: bool = False
    attach: tuple[Path, ...] = ()
    """Files attached to the prompt (``--attach``)."""


def read_prompt(prompt: str | None, prompt_file: Path | None) -> str:
    """The prompt text: the argument, stdin when it is ``-``, or the file; a UsageError naming the fix."""
    if prompt_file is not None:
        if prompt is not None:
            raise UsageError("give the prompt either as an argument or with --file, not both")
        try:
            text = prompt_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(f"prompt file {str(prompt_file)!r} does not exist; check the path") from None
        except UnicodeDecodeError:
            raise UsageError(f"prompt file {str(prompt_file)!r} is not UTF-8 text; convert it first") from None
        except OSError as exc:
            raise UsageError(f"prompt file {str(prompt_file)!r} cannot be read: {exc.strerror}") from None
    elif prompt == "-":
        try:
            text = sys.stdin.buffer.read().decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError("the prompt on stdin is not UTF-8 text; convert it first") from None
    elif prompt is None:
        raise UsageError("no prompt: pass it as an argument, '-' to read stdin, or --file PATH")
    else:
        text = prompt
    if not text.strip():
        raise UsageError("the prompt is empty; pass some text")
    return text.strip()


async def _infer(options: RunOptions, prompt: str, sinks: list[EventSink]) -> Turn:
    attachments = [file_attachment(path) for path in options.attach]  # a bad file fails before any request
    profile = choose_profile(options.settings)
    base = demo_registry() if options.with_tools else None
    async with mcp_tools([*(profile.mcp_servers or []), *options.mcp], base) as tools:
        with open_engine(profile, tools) as opened:
            chain = cli_middlewares(
                system=options.system, with_logging=options.with_logging, with_uppercase=options.with_uppercase
            )
            limits = UsageLimits.parse(options.limits) if options.limits else profile.usage_limits()
            # On a terminal, stderr shows how long the model has kept us waiting, until its first event.
            spinner = Spinner(sys.stderr, label=f" waiting for {profile.model}")
            session = Session(
                opened.engine,
                tools=tools,
                middlewares=chain,
                sinks=[spinner.sink, *sinks],
                approval=False if options.yes else None,
                limits=limits,
            )
            try:
                turn = await spinning(spinner, session.run(prompt, files=attachments))
                while waiting := session.pending_approvals:
                    # One shot, nobody to ask: the calls are denied and the model answers without them.
                    names = ", ".join(sorted({c.name for c in waiting}))
                    print(f"note: {names} needs approval and was not run; pass --yes to allow it", file=sys.stderr)
                    reason = "geppetto run cannot ask the user; they can rerun with --yes to allow it"
                    turn = await session.resume({c.call_id: reason for c in waiting})
                return turn
            finally:
                if options.usage:
                    totals = session.usage.to_dict()
                    Console(stderr=True).print(f"[dim]usage: {usage_line(totals)}[/dim]", highlight=False)
                    if totals.get("cost") is None and totals.get("unpriced_requests"):
                        Console(stderr=True).print(f"[dim]{escape(unpriced_hint())}[/dim]", highlight=False)


def run_command(options: RunOptions, prompt: str) -> Turn:
    """Run the inference (streaming), then save the turn if asked. Nothing is written unless it completed."""
    if options.save_turn is not None:
        check_turn_target(options.save_turn, "--save-turn")
    changed = options.with_uppercase and not options.json_events  # the middleware rewrites the answer
    sink: EventSink = (
        JsonLinesPrinter(sys.stdout) if options.json_events else text_printer(sys.stdout, text=not changed)
    )
    turn = asyncio.run(_infer(options, prompt, [sink]))
    if changed:
        # Not streamed: stdout gets the answer once, as the middleware left it.
        answer = [b for b in turn.blocks if b.kind is BlockKind.LLM_TEXT][-1:]
        if answer:
            print(answer[0].text)
            if cited := sources_text(citation_sources(answer[0].payload.get(PAYLOAD_CITATIONS))):
                print(f"\n{cited}", end="")
    if options.save_turn is not None:
        save_turn(options.save_turn, turn)
        Console(stderr=True).print(f"[dim]saved turn to {options.save_turn}[/dim]")
    return turn
