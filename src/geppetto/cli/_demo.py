"""``geppetto demo``: offline, a chained conversation with tool calls against the in-process simulator,
then what each request sent, and the same script's bytes in every mode against stateless."""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from .._exceptions import ProviderError
from ..events import TextPrinter
from ..middleware import system_prompt
from ..profiles import Profile, build_engine
from ..runtime import SIM_API_KEY, demo_registry
from ..session import Session
from ..simulator import serve

__all__ = ["PROMPTS", "DemoRun", "RequestRow", "run_demo", "run_script"]

SYSTEM = (
    "You are geppetto's demo assistant. Answer briefly, use the tools when they help, and say which tool "
    "gave you each number. "
) * 4  # a realistic system prompt is long; chained mode sends it once per conversation, not per request

PROMPTS = (
    "Hello! Who are you?",
    "What is the weather in Paris?",
    'Use the calculator on "17 * 23 + 4"',
    "And what is the weather in Tokyo?",
)


@dataclass(frozen=True)
class RequestRow:
    """One generation request the simulator received."""

    path: str
    size: int
    previous_response_id: str | None
    input_items: int


@dataclass
class DemoRun:
    """One run of the script in one mode: its requests and the final answer text."""

    mode: str
    requests: list[RequestRow]
    answers: list[str]

    @property
    def total_bytes(self) -> int:
        return sum(r.size for r in self.requests)


def _rows(requests: list[Any]) -> list[RequestRow]:
    rows = []
    for r in requests:
        body = r.body if isinstance(r.body, dict) else {}
        items = body.get("input")
        count = len(items) if isinstance(items, list) else (1 if isinstance(items, str) else 0)
        rows.append(RequestRow(r.path, r.size, body.get("previous_response_id"), count))
    return rows


async def _converse(session: Session, console: Console | None) -> list[str]:
    answers = []
    for prompt in PROMPTS:
        if console is not None:
            console.print(f"\n[bold cyan]you>[/bold cyan] {prompt}")
            console.print("[bold green]assistant>[/bold green] ", end="")
        turn = await session.run(prompt)
        answers.append(turn.blocks[-1].text)
    return answers


def run_script(mode: str, console: Console | None = None) -> DemoRun:
    """Run the demo conversation in ``mode`` against a fresh simulator; stream it to ``console`` if given."""
    registry = demo_registry()
    with serve() as sim:
        profile = Profile(name="demo", provider="openai-responses", model="sim-1", mode=mode)
        tools = [d.to_dict() for d in registry.list()]
        engine = build_engine(profile, api_key=SIM_API_KEY, base_url=sim.openai_url, tools=tools)
        out = console.file if console is not None else io.StringIO()
        session = Session(engine, tools=registry, middlewares=[system_prompt(SYSTEM)], sinks=[TextPrinter(out)])
        answers = asyncio.run(_converse(session, console))
        return DemoRun(mode, _rows(sim.requests), answers)


def run_demo(console: Console | None = None) -> dict[str, DemoRun]:
    """The whole demo: stream the chained run, then tabulate its requests and every mode's bytes."""
    console = console or Console()
    console.print("[bold]geppetto demo[/bold] · offline: the bundled simulator runs in this process\n")
    console.print("[dim]Chained mode: each request sends previous_response_id and only the new blocks.[/dim]")
    runs = {"chained": run_script("chained", console)}
    failed: dict[str, str] = {}
    for mode in ("stateless", "conversation"):
        try:
            runs[mode] = run_script(mode)
        except ProviderError as exc:  # shown in the table rather than hiding the modes that worked
            failed[mode] = str(exc)
    chained = runs["chained"]
    table = Table(title="\nRequests in chained mode")
    for column in ("#", "path", "bytes", "previous_response_id (anchor)", "input items"):
        table.add_column(column, no_wrap=True)
    for i, row in enumerate(chained.requests, 1):
        table.add_row(
            str(i), row.path, str(row.size), row.previous_response_id or "— (full turn)", str(row.input_items)
        )
    console.print(table)
    base = runs["stateless"].total_bytes if "stateless" in runs else 0
    summary = Table(title="Bytes sent for the same conversation, per mode")
    for column in ("mode", "requests", "bytes sent", "vs stateless"):
        summary.add_column(column, no_wrap=True)
    for mode in ("stateless", "chained", "conversation"):
        if mode in failed:
            summary.add_row(mode, "—", f"failed: {failed[mode]}", "")
            continue
        run = runs[mode]
        ratio = f"{run.total_bytes / base:.0%}" if base else "n/a"
        summary.add_row(mode, str(len(run.requests)), str(run.total_bytes), ratio)
    console.print(summary)
    console.print(
        "Chained and conversation modes send each block once; stateless resends the whole Turn every time. "
        "Try `geppetto run --profile sim --with-tools 'weather in Rome?'` or `geppetto chat --profile sim`."
    )
    return runs
