"""The offline demo: a short conversation through middleware, with provenance shown per block."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..engine import run_sync
from ..middleware import system_prompt, with_middleware
from ..testing import ScriptedEngine
from ..turns import BLOCK_META_MIDDLEWARE, Block, Turn


def run_demo(console: Console | None = None) -> Turn:
    """Two prompts through a system-prompt middleware around a scripted engine; prints the blocks."""
    console = console or Console()
    engine = ScriptedEngine([Block.llm_text("Hello! How can I help?"), Block.llm_text("Paris is 18°C and sunny.")])
    wrapped = with_middleware(engine, system_prompt("You are a terse assistant."))
    turn = Turn()
    for prompt in ("Hi there", "Weather in Paris?"):
        console.print(f"[bold]user>[/bold] {prompt}")
        turn = turn.clone()
        turn.append(Block.user(prompt))
        turn = run_sync(wrapped, turn)
        console.print(f"[bold]assistant>[/bold] {turn.blocks[-1].text}")
    table = Table(title="Blocks of the final turn")
    for col in ("#", "kind", "text", "turn_id", "middleware"):
        table.add_column(col)
    for i, b in enumerate(turn.blocks):
        table.add_row(str(i), b.kind.value, b.text, b.turn_id[:8], BLOCK_META_MIDDLEWARE.get(b.metadata) or "")
    console.print(table)
    return turn
