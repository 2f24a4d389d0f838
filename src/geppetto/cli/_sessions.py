"""``geppetto sessions``: list, show, export and delete the sessions kept in a store."""

from __future__ import annotations

import asyncio
import datetime
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.table import Table

from .._exceptions import UsageError
from ..session.stores import SQLiteTurnStore, SQLTurnStore, open_store
from ..turns import Turn, dumps_json, dumps_yaml, save_turn
from ._guard import fail, guarded
from ._inspect import render_turn
from ._runtime import stdout_console

__all__ = ["StoreOpt", "sessions_app"]

T = TypeVar("T")

sessions_app = typer.Typer(
    help="List, show, export and delete stored sessions.", no_args_is_help=True, rich_markup_mode=None
)

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="GEPPETTO_STORE",
        help="Session store: a SQLite file or postgresql:// URL (default: sessions.db in the data folder).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print as JSON.")]


def with_store(target: str | None, action: Callable[[SQLTurnStore], Awaitable[T]]) -> T:
    """Open the store, run ``action`` on it and close it; errors end the command with one line."""

    async def go() -> T:
        with open_store(target, create=False) as store:  # reading commands never make a store or its folder
            return await action(store)

    return guarded(lambda: asyncio.run(go()))


def _when(at: float | None) -> str:
    if at is None:
        return ""
    return datetime.datetime.fromtimestamp(at).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _preview(text: str, width: int = 48) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


async def _resolve(store: SQLTurnStore, session_id: str) -> str:
    """The full id of the session ``session_id`` names (the whole id or a unique prefix)."""
    if isinstance(store, SQLiteTurnStore) and not store.path.exists():
        raise UsageError(
            f"no session {session_id!r} in {store.location}: nothing was saved there yet; "
            "list them with `geppetto sessions list`"
        )
    return await store.resolve_session(session_id)


async def _snapshots(store: SQLTurnStore, session_id: str) -> list[Turn]:
    turns = await store.load_session(await _resolve(store, session_id))
    if not turns:
        raise UsageError(f"no session {session_id!r} in {store.location}; list them with `geppetto sessions list`")
    return turns


@sessions_app.command("list")
def sessions_list(store: StoreOpt = None, json_out: JsonOpt = False) -> None:
    """Every stored session: id, snapshots, blocks in the latest, last saved, first prompt."""

    async def action(s: SQLTurnStore) -> tuple[str, list[Any]]:
        if isinstance(s, SQLiteTurnStore) and not s.path.exists():
            return s.location, []
        return s.location, await s.session_infos()

    location, infos = with_store(store, action)
    if json_out:
        print(json.dumps([i.to_dict() for i in infos], indent=2, ensure_ascii=False))
        return
    if not infos:
        print(f"no sessions in {location}; `geppetto chat` starts one")
        return
    table = Table(title=f"sessions ({location})")
    for column in ("session", "provider", "model", "mode", "snapshots", "blocks", "updated", "first prompt"):
        table.add_column(column, no_wrap=column != "first prompt")
    for i in infos:
        table.add_row(
            i.session_id,
            i.provider,
            i.model,
            i.mode,
            str(i.snapshots),
            str(i.blocks),
            _when(i.updated_at),
            _preview(i.first_prompt),
        )
    stdout_console().print(table)


@sessions_app.command("show")
def sessions_show(
    session_id: Annotated[str, typer.Argument(help="Session id (see `geppetto sessions list`).")],
    store: StoreOpt = None,
    json_out: JsonOpt = False,
    events: Annotated[bool, typer.Option("--events", help="Also show the recorded events.")] = False,
) -> None:
    """A session's snapshots, then the latest Turn's blocks with provenance and the chained-request plan."""

    async def action(s: SQLTurnStore) -> tuple[str, list[Turn], list[Any], list[Any]]:
        full = await _resolve(s, session_id)
        turns = await _snapshots(s, full)
        logged = await s.load_events(full) if events else []
        return full, turns, await s.snapshot_infos(full), logged

    session_id, turns, snaps, logged = with_store(store, action)
    if json_out:
        out: dict[str, Any] = {
            "session_id": session_id,
            "snapshots": [
                {
                    "seq": n.seq,
                    "turn_id": n.turn_id,
                    "inference_id": n.inference_id,
                    "saved_at": n.saved_at,
                    "blocks": n.blocks,
                }
                for n in snaps
            ],
            "latest": json.loads(dumps_json(turns[-1])),
        }
        if events:
            out["events"] = [{"inference_id": e.inference_id, "seq": e.seq, "at": e.at, **e.event} for e in logged]
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return
    console = stdout_console()
    table = Table(title=f"session {session_id}")
    for column in ("seq", "turn_id", "inference_id", "blocks", "saved"):
        table.add_column(column, no_wrap=True)
    for n in snaps:
        table.add_row(str(n.seq), n.turn_id, n.inference_id or "", str(n.blocks), _when(n.saved_at))
    console.print(table)
    render_turn(turns[-1], console, title=f"latest snapshot · turn {turns[-1].id}")
    if events:
        for e in logged:
            detail = {k: v for k, v in e.event.items() if k not in ("type", "metadata")}
            console.print(f"{_when(e.at)} {e.inference_id[:8]} {e.type} {json.dumps(detail, ensure_ascii=False)}")


@sessions_app.command("export")
def sessions_export(
    session_id: Annotated[str, typer.Argument(help="Session id.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write a turn file here (JSON for .json, else YAML).")
    ] = None,
    snapshot: Annotated[int | None, typer.Option(help="Snapshot number (default: the latest).")] = None,
    store: StoreOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """A snapshot as a turn file, readable by `geppetto inspect` and `geppetto chat --resume`."""
    turns = with_store(store, lambda s: _snapshots(s, session_id))
    if snapshot is not None and not 1 <= snapshot <= len(turns):
        fail(f"session {session_id} has snapshots 1 to {len(turns)}; pick one of them with --snapshot")
    turn = turns[(snapshot or len(turns)) - 1]
    if output is not None:
        save_turn(output, turn)
        print(f"wrote {len(turn.blocks)} blocks to {output}", file=sys.stderr)
    else:
        sys.stdout.write(dumps_json(turn) + "\n" if json_out else dumps_yaml(turn))


@sessions_app.command("delete")
def sessions_delete(
    session_id: Annotated[str, typer.Argument(help="Session id.")],
    store: StoreOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a session with its snapshots and events."""
    # The full id is found first, so a wrong or ambiguous one is said before any confirmation is asked
    # and the confirmation names the session that will go.
    full_id = with_store(store, lambda s: _resolve(s, session_id))
    if not yes:
        if not sys.stdin.isatty():
            fail(f"deleting session {full_id} cannot be undone; pass --yes to confirm")
        typer.confirm(f"Delete session {full_id} and everything recorded for it?", abort=True)

    async def delete(s: SQLTurnStore) -> None:
        await s.delete_session(full_id)

    with_store(store, delete)
    print(f"deleted session {full_id}")
