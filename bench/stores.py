"""Session store cost: saving one snapshot per inference as a conversation grows, SQLite and PostgreSQL.

A session of INFERENCES tool-loop inferences (user, tool_call, a 2 KB tool_use, llm_text: four blocks each)
is saved snapshot by snapshot, as a Session with a store does. Side by side in one run:

- ``raw``: the least a store can do with stdlib sqlite3: one INSERT of the Turn's JSON document per
  snapshot in one transaction (no block rows, so no SQL over provenance), and loading parses every
  document back into a Turn, as the stores do;
- ``sqlite``: :class:`SQLiteTurnStore` (document plus one row per block, in one transaction);
- ``postgres``: :class:`PostgresTurnStore` on a fresh schema, when the server answers
  (``GEPPETTO_BENCH_POSTGRES_URL``, default the local database ``test``); skipped with the reason otherwise.

It prints per backend the median and last save time, the time to load the whole session back, and the
ratio to ``raw``. Usage: ``.venv/bin/python bench/stores.py [INFERENCES]``.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, median, table

from geppetto.session.stores import PostgresTurnStore, SQLiteTurnStore, SQLTurnStore
from geppetto.turns import Block, Turn, dumps_json, loads_json

POSTGRES_URL = os.environ.get("GEPPETTO_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
RESULT = "x" * 2048


def snapshots(inferences: int) -> Iterator[Turn]:
    """The Turn after each inference of one growing conversation (a clone each, as a Session saves)."""
    turn = Turn()
    for i in range(inferences):
        turn.append(Block.user(f"Question {i}?"))
        turn.append(Block.tool_call(f"call_{i}", "lookup", {"q": i}))
        turn.append(Block.tool_use(f"call_{i}", RESULT))
        turn.append(Block.llm_text(f"Answer {i}."))
        yield turn.clone()


def run_raw(path: Path, turns: list[Turn]) -> tuple[list[float], float]:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE snapshots (session_id TEXT, seq INTEGER, document TEXT, PRIMARY KEY (session_id, seq))")
    saves = []
    for seq, turn in enumerate(turns):
        start = time.perf_counter()
        with conn:
            conn.execute("INSERT INTO snapshots VALUES (?, ?, ?)", ("s", seq, dumps_json(turn)))
        saves.append(time.perf_counter() - start)
    start = time.perf_counter()
    rows = conn.execute("SELECT document FROM snapshots WHERE session_id = 's' ORDER BY seq").fetchall()
    loaded = [loads_json(doc) for (doc,) in rows]
    load = time.perf_counter() - start
    assert loaded[-1] == turns[-1]
    conn.close()
    return saves, load


async def run_store(store: SQLTurnStore, turns: list[Turn]) -> tuple[list[float], float]:
    saves = []
    for turn in turns:
        start = time.perf_counter()
        await store.save_snapshot("s", turn)
        saves.append(time.perf_counter() - start)
    start = time.perf_counter()
    loaded = await store.load_session("s")
    load = time.perf_counter() - start
    assert loaded[-1] == turns[-1], "the last snapshot must load back equal"
    return saves, load


@contextmanager
def postgres_schema() -> Iterator[str | None]:
    """A URL on a fresh schema (dropped afterwards), or None with the reason printed."""
    try:
        import psycopg
    except ImportError:
        print("postgres: skipped (psycopg is not installed: pip install 'geppetto[postgres]')")
        yield None
        return
    schema = f"geppetto_bench_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
    except psycopg.OperationalError as exc:
        print(f"postgres: skipped ({POSTGRES_URL} is not reachable: {str(exc).strip().splitlines()[0]})")
        yield None
        return
    try:
        yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def main() -> None:
    inferences = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    turns = list(snapshots(inferences))
    print(f"# bench/stores.py: {inferences} inferences, final Turn {len(turns[-1].blocks)} blocks; {machine()}\n")
    results: dict[str, tuple[list[float], float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        results["raw"] = run_raw(Path(tmp) / "raw.db", turns)
        with SQLiteTurnStore(Path(tmp) / "store.db") as sqlite_store:
            results["sqlite"] = asyncio.run(run_store(sqlite_store, turns))
        sizes = {name: (Path(tmp) / f"{name}.db").stat().st_size for name in ("raw", "store")}
        with postgres_schema() as url:
            if url is not None:
                with PostgresTurnStore(url) as pg_store:
                    results["postgres"] = asyncio.run(run_store(pg_store, turns))

    raw_save = median(results["raw"][0])
    ms: Callable[[float], float] = lambda s: s * 1000  # noqa: E731
    rows: list[list[Any]] = []
    for name, (saves, load) in results.items():
        rows.append(
            [name, ms(median(saves)), ms(saves[-1]), ms(load), f"{median(saves) / raw_save:.1f}x"],
        )
    print(table(["backend", "median save ms", "last save ms", "load session ms", "save vs raw"], rows))
    print(f"\nSQLite file sizes: raw {sizes['raw'] / 1e6:.1f} MB, SQLiteTurnStore {sizes['store'] / 1e6:.1f} MB")
    summary = ", ".join(f"{name} {median(s) / raw_save:.1f}x raw" for name, (s, _) in results.items() if name != "raw")
    print(f"SUMMARY: median snapshot save {summary} (raw sqlite3 document insert {ms(raw_save):.2f} ms)")


if __name__ == "__main__":
    main()
