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
from ..session import TURN_META_SESSION_USAGE
from ..session.stores import SQLiteTurnStore, SQLTurnStore, open_store
from ..turns import Turn, dumps_json, dumps_yaml, save_turn
from ..web import plural
from ._console import stdout_console
from ._guard import fail, guarded
from ._inspect import render_turn
from ._usage import format_cost, usage_line

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
SHOW_LAST = 20
"""Snapshots ``geppetto sessions show`` lists unless ``--last`` says otherwise."""


def with_store(target: str | None, action: Callable[[SQLTurnStore], Awaitable[T]]) -> T:
    """Open the store, run ``action`` on it and close it; errors end the command with one line."""

    async def go() -> T:
        with open_store(target, create=False) as store:  # reading commands never make a store or its folder
            return await action(store)

    return guarded(lambda: asyncio.run(go()))


def usage_cells(usage: dict[str, Any] | None) -> tuple[str, str, str]:
    """Requests, tokens (input/cached/output) and cost of a session's usage totals, as table cells."""
    if not usage:
        return "", "", ""
    tokens = f"{usage.get('input_tokens', 0)}/{usage.get('cached_tokens', 0)}/{usage.get('output_tokens', 0)}"
    return str(usage.get("requests", 0)), tokens, format_cost(usage.get("cost"))


def _when(at: float | None) -> str:
    """``MM-DD HH:MM`` in local time (the year too when it is not this one)."""
    if at is None:
        return ""
    when = datetime.datetime.fromtimestamp(at).astimezone()
    return when.strftime("%m-%d %H:%M" if when.year == datetime.datetime.now().year else "%Y-%m-%d %H:%M")


def short_ids(ids: list[str], least: int = 8) -> dict[str, str]:
    """Each id cut to its shortest start (``least`` characters or more) that no other id in ``ids`` shares."""
    short: dict[str, str] = {}
    for sid in ids:
        n = least
        while n < len(sid) and any(o != sid and o.startswith(sid[:n]) for o in ids):
            n += 1
        short[sid] = sid[:n]
    return short


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


async def _snapshot(store: SQLTurnStore, session_id: str, seq: int | None = None) -> tuple[str, Turn]:
    """The full id of ``session_id`` and its snapshot ``seq`` (the latest when None): one snapshot read."""
    full = await _resolve(store, session_id)
    turn = await store.load_latest(full) if seq is None else await store.load_snapshot(full, seq)
    if turn is None and seq is not None and (count := await store.latest_seq(full)):
        raise UsageError(f"session {full} has snapshots 1 to {count}; pick one of them with --snapshot")
    if turn is None:
        raise UsageError(f"no session {session_id!r} in {store.location}; list them with `geppetto sessions list`")
    return full, turn


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
    short = short_ids([i.session_id for i in infos])
    rows = [
        [
            short[i.session_id],
            i.provider,
            i.model,
            i.mode,
            str(i.snapshots),
            str(i.blocks),
            *usage_cells(i.usage),
            _when(i.updated_at),
        ]
        for i in infos
    ]
    headers = ["session", "provider", "model", "mode", "snaps", "blocks", "reqs", "tokens", "cost", "updated"]
    console = stdout_console()
    # One space between columns and no rules, so the table fits 100 columns; the first prompt takes the width
    # that is left (at least 12 columns), so no header is ever cut.
    used = sum(max(len(h), *(len(r[n]) for r in rows)) + 1 for n, h in enumerate(headers))
    room = max(12, console.width - used - 1)
    table = Table(
        title=f"sessions ({location})",
        title_justify="left",
        caption="tokens: input/cached/output; `geppetto sessions show ID` takes any unique start of an id",
        caption_justify="left",
        box=None,
        padding=(0, 1, 0, 0),
        header_style="bold",
    )
    for n, header in enumerate(headers):
        table.add_column(header, no_wrap=True, justify="right" if 4 <= n <= 8 else "left")
    table.add_column("first prompt", no_wrap=True, overflow="ellipsis", max_width=room)
    for row, i in zip(rows, infos, strict=True):
        table.add_row(*row, _preview(i.first_prompt, room))
    console.print(table)


@sessions_app.command("show")
def sessions_show(
    session_id: Annotated[str, typer.Argument(help="Session id (see `geppetto sessions list`).")],
    store: StoreOpt = None,
    json_out: JsonOpt = False,
    events: Annotated[
        bool, typer.Option("--events", help="Also show the events recorded for the snapshots shown.")
    ] = False,
    last: Annotated[
        int,
        typer.Option("--last", min=0, help="Show the last N snapshots (and their events); 0 shows them all."),
    ] = SHOW_LAST,
) -> None:
    """A session's last snapshots, then the latest Turn's blocks with provenance and the chained-request plan."""

    async def action(s: SQLTurnStore) -> tuple[str, Turn, list[Any], int, list[Any]]:
        full, latest = await _snapshot(s, session_id)
        snaps = await s.snapshot_infos(full, limit=last or None)
        count = snaps[-1].seq if snaps else 0
        logged: list[Any] = []
        if events:
            # The events published after the save of the snapshot before the first one shown.
            prior = await s.snapshot_infos(full, before=snaps[0].seq, limit=1) if snaps else []
            logged = await s.load_events(full, after=prior[0].saved_at if prior else None)
        return full, latest, snaps, count, logged

    session_id, latest, snaps, count, logged = with_store(store, action)
    if json_out:
        print(
            json.dumps(
                _show_json(session_id, latest, snaps, count, logged if events else None), indent=2, ensure_ascii=False
            )
        )
        return
    _show_table(session_id, latest, snaps, count, logged if events else None)


def _show_json(session_id: str, latest: Turn, snaps: list[Any], count: int, logged: list[Any] | None) -> dict[str, Any]:
    """``sessions show --json``: the snapshots shown, the usage and the latest Turn (and the events)."""
    out: dict[str, Any] = {
        "session_id": session_id,
        "snapshot_count": count,
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
        "usage": TURN_META_SESSION_USAGE.get(latest.metadata),
        "latest": json.loads(dumps_json(latest)),
    }
    if logged is not None:
        out["events"] = [{"inference_id": e.inference_id, "seq": e.seq, "at": e.at, **e.event} for e in logged]
    return out


def _show_table(session_id: str, latest: Turn, snaps: list[Any], count: int, logged: list[Any] | None) -> None:
    """``sessions show``: the snapshots shown as a table, the latest Turn's blocks, the usage (and the events)."""
    console = stdout_console()
    table = Table(title=f"session {session_id}")
    for column in ("seq", "turn_id", "inference_id", "blocks", "saved"):
        table.add_column(column, no_wrap=True)
    for n in snaps:
        table.add_row(str(n.seq), n.turn_id, n.inference_id or "", str(n.blocks), _when(n.saved_at))
    console.print(table)
    if snaps and snaps[0].seq > 1:
        console.print(f"snapshots {snaps[0].seq} to {count} of {count}; --last N shows more, --last 0 all of them")
    render_turn(latest, console, title=f"latest snapshot · turn {latest.id}")
    totals = TURN_META_SESSION_USAGE.get(latest.metadata)
    if totals is not None:
        console.print(f"usage: {usage_line(totals)}")
    for e in logged or ():
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
    if snapshot is not None and snapshot < 1:
        fail(f"--snapshot takes a snapshot number from 1 (got {snapshot}); `geppetto sessions show` lists them")
    _full, turn = with_store(store, lambda s: _snapshot(s, session_id, snapshot))
    if output is not None:
        save_turn(output, turn)
        print(f"wrote {plural(len(turn.blocks), 'block')} to {output}", file=sys.stderr)
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
