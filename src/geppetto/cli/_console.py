"""What the commands share besides the runtime: the console, the text printer, the middleware the flags ask
for, ``--verbose`` logging and the check of a turn file's place."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import IO, Any

from rich.console import Console

from .._exceptions import UsageError
from ..engine import Handler
from ..events import Event, EventCitations, EventError, EventFinal, EventSink, EventTextDelta, TextPrinter
from ..middleware import Middleware, logging_middleware, new_blocks_not_in, snapshot_block_ids, system_prompt
from ..turns import BLOCK_META_MIDDLEWARE, PAYLOAD_TEXT, BlockKind, Turn, source_key

__all__ = [
    "FileNotWritable",
    "check_turn_target",
    "cli_middlewares",
    "sources_text",
    "stdout_console",
    "text_printer",
    "uppercase_middleware",
    "verbose_log",
]


def uppercase_middleware() -> Middleware:
    """Uppercase the text of every llm_text block the inference adds."""

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            before = snapshot_block_ids(turn)
            out = await next_handler(turn)
            for block in new_blocks_not_in(out, before):
                if block.kind is BlockKind.LLM_TEXT:
                    block.payload[PAYLOAD_TEXT] = str(block.payload.get(PAYLOAD_TEXT, "")).upper()
                    BLOCK_META_MIDDLEWARE.set(block.metadata, "uppercase")
            return out

        return handler

    return middleware


def cli_middlewares(*, system: str | None, with_logging: bool, with_uppercase: bool) -> list[Middleware]:
    """The middleware the flags ask for, outermost first; logging goes to stderr."""
    chain: list[Middleware] = []
    if system:
        chain.append(system_prompt(system))
    if with_logging:
        logger = logging.getLogger("geppetto.cli")
        if not logger.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)
            logger.propagate = False
        chain.append(logging_middleware(logger))
    if with_uppercase:
        chain.append(uppercase_middleware())
    return chain


def verbose_log() -> None:
    """``--verbose``: every geppetto log record from DEBUG up on stderr, one line each, with its logger."""
    logger = logging.getLogger("geppetto")
    if any(getattr(h, "geppetto_verbose", False) for h in logger.handlers):
        return  # given twice (geppetto -v run -v)
    handler = logging.StreamHandler(sys.stderr)
    handler.geppetto_verbose = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)


def stdout_console(width: int = 160) -> Console:
    """A console for stdout: the terminal's width (or ``$COLUMNS`` when set), else ``width`` columns when piped
    (so tables are not squeezed)."""
    return Console() if sys.stdout.isatty() or os.environ.get("COLUMNS") else Console(width=width)


def check_turn_target(path: Path, what: str = "the turn file") -> None:
    """Refuse, before any work is done, a place a turn file cannot be written: a folder (a usage error, exit 2),
    or a file in a folder that does not exist (a file that cannot be written, exit 1, as the README says)."""
    if path.is_dir():
        raise UsageError(f"{what} {str(path)!r} is a folder; give a file path such as {str(path / 'turn.yaml')!r}")
    if not path.parent.is_dir():
        raise FileNotWritable(f"cannot write {what} {str(path)!r}: the folder {str(path.parent)!r} does not exist")


class FileNotWritable(OSError):
    """A file the command was asked to write cannot be written (exit 1, like any failed write)."""


def sources_text(citations: list[dict[str, Any]]) -> str:
    """Normalized citations (see :func:`geppetto.turns.citation_sources`) as a numbered "Sources" list, each
    source once: its title and its URL (or document); ``""`` when nothing is cited."""
    seen: dict[str, str] = {}
    for c in citations:
        where = source_key(c)
        if where and where not in seen:
            title = str(c.get("title") or "")
            seen[where] = f"{title} — {where}" if title and title != where else where
    lines = [f"  [{n}] {shown}" for n, shown in enumerate(seen.values(), 1)]
    return "\n".join(["Sources:", *lines]) + "\n" if lines else ""


def text_printer(stream: IO[str], *, text: bool = True) -> EventSink:
    """Streamed text and tool lines for a person, and after a model call's text the sources it cites (from
    its ``citations`` event); errors are left to the command, which prints them once on stderr.
    ``text=False`` leaves the answer's text and sources out too (a middleware will change the text, and the
    command prints the changed answer and its sources instead)."""
    printer = TextPrinter(stream)

    def sink(event: Event) -> None:
        if isinstance(event, EventCitations):
            if text and (shown := sources_text(event.citations)):
                stream.write(f"\n\n{shown}")
                stream.flush()
            return
        if isinstance(event, EventError) or (not text and isinstance(event, EventTextDelta | EventFinal)):
            return
        printer(event)

    return sink
