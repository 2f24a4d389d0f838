"""A :class:`~geppetto.session.TurnStore` in a SQLite file (stdlib ``sqlite3`` in a worker thread)."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from ..._exceptions import StoreError
from ...turns import BLOCK_META_INFERENCE_ID, BLOCK_META_RESPONSE_ID, Turn, dumps_json, loads_json
from ._schema import MIGRATIONS, SCHEMA_VERSION

__all__ = ["SQLiteTurnStore", "default_store_path", "open_store"]


def default_store_path() -> Path:
    """``$GEPPETTO_DATA_DIR/sessions.db``, else ``$XDG_DATA_HOME/geppetto/sessions.db``, else
    ``~/.local/share/geppetto/sessions.db``."""
    if d := os.environ.get("GEPPETTO_DATA_DIR"):
        return Path(d) / "sessions.db"
    if x := os.environ.get("XDG_DATA_HOME"):
        return Path(x) / "geppetto" / "sessions.db"
    return Path.home() / ".local" / "share" / "geppetto" / "sessions.db"


def open_store(target: str | os.PathLike[str] | None = None) -> SQLiteTurnStore:
    """A store for ``target``: a file path or ``sqlite:///path`` (None: :func:`default_store_path`)."""
    if target is None:
        return SQLiteTurnStore(default_store_path())
    text = os.fspath(target)
    if text.startswith(("postgresql://", "postgres://")):
        raise StoreError(f"PostgreSQL stores are not available in this version; use a SQLite path instead of {text!r}")
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    return SQLiteTurnStore(text)


def block_rows(session_id: str, seq: int, turn: Turn) -> list[tuple[Any, ...]]:
    """One provenance row per block of ``turn``, in order."""
    return [
        (
            session_id,
            seq,
            i,
            b.id,
            b.kind.value,
            b.role,
            b.turn_id,
            BLOCK_META_INFERENCE_ID.get(b.metadata),
            BLOCK_META_RESPONSE_ID.get(b.metadata),
            json.dumps(b.payload),
            json.dumps(dict(b.metadata)),
        )
        for i, b in enumerate(turn.blocks)
    ]


class SQLiteTurnStore:
    """Session snapshots in a SQLite file; each snapshot is saved in one transaction.

    The file and its folder are created on first use. A file that is not a geppetto store, is corrupt, or
    comes from a newer geppetto raises :class:`~geppetto.StoreError` and is left untouched."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA foreign_keys = ON")
            self._migrate(conn)
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"session store {self.path} is not a readable SQLite database ({exc}); "
                "move it aside or point geppetto at another file"
            ) from exc
        except OSError as exc:
            raise StoreError(f"cannot open session store {self.path}: {exc}; check the path and permissions") from exc
        self._conn = conn
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS geppetto_schema (version INTEGER NOT NULL)")
            row = conn.execute("SELECT max(version) FROM geppetto_schema").fetchone()
            current = row[0] or 0
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"session store {self.path} has schema version {current}, newer than this geppetto knows "
                    f"({SCHEMA_VERSION}); upgrade geppetto to open it"
                )
            for number in range(current + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[number - 1]:
                    conn.execute(statement)
                conn.execute("INSERT INTO geppetto_schema (version) VALUES (?)", (number,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _run(self, fn: Any, *args: Any) -> Any:
        with self._lock:
            conn = self._connect()
            try:
                return fn(conn, *args)
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"session store {self.path} failed: {exc}; check the file is not corrupt") from exc

    def _save(self, conn: sqlite3.Connection, session_id: str, document: str, turn: Turn) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            seq = conn.execute("SELECT coalesce(max(seq), 0) + 1 FROM snapshots WHERE session_id = ?", (session_id,))
            number = seq.fetchone()[0]
            if number == 1:
                nxt = conn.execute("SELECT coalesce(max(created_seq), 0) + 1 FROM sessions").fetchone()[0]
                conn.execute("INSERT OR IGNORE INTO sessions (id, created_seq) VALUES (?, ?)", (session_id, nxt))
            conn.execute(
                "INSERT INTO snapshots (session_id, seq, turn_id, document) VALUES (?, ?, ?, ?)",
                (session_id, number, turn.id, document),
            )
            conn.executemany(
                "INSERT INTO blocks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", block_rows(session_id, number, turn)
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    async def save_snapshot(self, session_id: str, turn: Turn) -> None:
        """Append ``turn`` as the newest snapshot of ``session_id`` (atomically: all of it or nothing)."""
        document = dumps_json(turn)
        await asyncio.to_thread(self._run, self._save, session_id, document, turn)

    @staticmethod
    def _load(conn: sqlite3.Connection, session_id: str) -> list[str]:
        rows = conn.execute("SELECT document FROM snapshots WHERE session_id = ? ORDER BY seq", (session_id,))
        return [r[0] for r in rows.fetchall()]

    async def load_session(self, session_id: str) -> list[Turn]:
        """The snapshots of ``session_id``, oldest first (empty when unknown)."""
        docs: list[str] = await asyncio.to_thread(self._run, self._load, session_id)
        return [loads_json(d, source=f"{self.path} session {session_id}") for d in docs]

    async def list_sessions(self) -> list[str]:
        """Every session id with a snapshot, in the order first saved."""
        rows = await asyncio.to_thread(
            self._run, lambda c: c.execute("SELECT id FROM sessions ORDER BY created_seq").fetchall()
        )
        return [r[0] for r in rows]

    async def delete_session(self, session_id: str) -> None:
        """Remove ``session_id`` and all its snapshots; :class:`~geppetto.StoreError` when it does not exist."""

        def delete(conn: sqlite3.Connection) -> int:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("DELETE FROM blocks WHERE session_id = ?", (session_id,))
                conn.execute("DELETE FROM snapshots WHERE session_id = ?", (session_id,))
                n = conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return n

        if await asyncio.to_thread(self._run, delete) == 0:
            raise StoreError(f"no session {session_id!r} in {self.path}; list sessions to see the ids")

    def close(self) -> None:
        """Close the connection (the store reopens on next use)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
