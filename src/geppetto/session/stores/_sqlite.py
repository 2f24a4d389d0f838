"""A :class:`~geppetto.session.TurnStore` in a SQLite file (stdlib ``sqlite3`` in a worker thread): the SQLite
dialect, the file the store's operations run on, and :class:`SQLiteTurnStore`, which puts them together."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..._exceptions import StoreError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]
from ._dialect import HELD_LOCK, Dialect
from ._sql import SQLTurnStore

_LOCK_RANGE = 1 << 62
_NO_RECORD_LOCKS = fcntl is None

__all__ = ["SQLITE", "SQLiteFile", "SQLiteTurnStore", "default_store_path"]

SQLITE = Dialect(
    "sqlite",
    insert_session="INSERT INTO sessions (id, created_seq) "
    "SELECT ?, coalesce(max(created_seq), 0) + 1 FROM sessions WHERE true ON CONFLICT (id) DO NOTHING",
)
"""SQLite's spelling: its transactions (``BEGIN IMMEDIATE``) already make one writer at a time."""


def default_store_path() -> Path:
    """``$GEPPETTO_DATA_DIR/sessions.db``, else ``$XDG_DATA_HOME/geppetto/sessions.db``, else
    ``~/.local/share/geppetto/sessions.db``."""
    if d := os.environ.get("GEPPETTO_DATA_DIR"):
        return Path(d) / "sessions.db"
    if x := os.environ.get("XDG_DATA_HOME"):
        return Path(x) / "geppetto" / "sessions.db"
    return Path.home() / ".local" / "share" / "geppetto" / "sessions.db"


class SQLiteFile:
    """A SQLite file as a store's database: one connection, used by one worker thread at a time; several
    processes may share the file. Session leases are byte-range locks in ``<file>.locks``."""

    errors: tuple[type[BaseException], ...] = (sqlite3.DatabaseError,)
    reconnect_for = 0.0

    def __init__(self, path: Path, *, create: bool = True) -> None:
        self.path = path
        self.create = create
        self.location = str(path)
        self.held: set[int] = set()
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._lock_fd: int | None = None

    def _open(self, prepare: Callable[[Any], None]) -> sqlite3.Connection:
        if not self.create and not self.path.exists():
            raise StoreError(f"no session store at {self.path}: nothing was saved there; check the path (or --store)")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        except OSError as exc:
            raise StoreError(f"cannot open session store {self.path}: {exc}; check the path and permissions") from exc
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            prepare(conn)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(
                f"session store {self.path} is not a readable SQLite database ({exc}); "
                "move it aside or point geppetto at another file"
            ) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    @contextlib.contextmanager
    def connection(self, prepare: Callable[[Any], None]) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._conn is None:
                self._conn = self._open(prepare)
            yield self._conn

    @contextlib.contextmanager
    def transaction(self, conn: sqlite3.Connection) -> Iterator[None]:
        # IMMEDIATE takes the write lock up front, so two writers never both read the same next seq.
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def lock_migrations(self, conn: Any) -> None:
        """Nothing to do: the migration's ``BEGIN IMMEDIATE`` keeps other processes out."""

    def connection_lost(self, exc: BaseException) -> bool:
        return False  # a file does not go away under an open connection

    def check_leases(self) -> set[int]:
        return set()  # the kernel holds the locks as long as the process lives

    # Per-session locks are byte-range locks in ``<file>.locks``: the kernel frees a killed process's.
    def try_lock_key(self, key: int) -> bool:
        if _NO_RECORD_LOCKS:  # one process per store file there
            return True
        if self._lock_fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(f"{self.path}.locks", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.lockf(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, key % _LOCK_RANGE)
        except OSError:
            return False
        return True

    def unlock_key(self, key: int) -> None:
        if not _NO_RECORD_LOCKS and self._lock_fd is not None:
            fcntl.lockf(self._lock_fd, fcntl.LOCK_UN, 1, key % _LOCK_RANGE)

    def refuse(self, exc: BaseException) -> StoreError:
        return StoreError(f"session store {self.path} failed: {exc}; check the file is not corrupt")

    def close(self) -> None:
        """Close the connection (the store reopens on next use)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        with HELD_LOCK:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
                self.held.clear()


class SQLiteTurnStore(SQLTurnStore):
    """Session snapshots in a SQLite file; each snapshot is saved in one transaction.

    The file and its folder are created on first use (unless ``create=False``: then a missing file is a
    :class:`~geppetto.StoreError` and nothing is made, for commands that only read); migrations run then. A file that is not a geppetto
    store, is corrupt, or comes from a newer geppetto raises :class:`~geppetto.StoreError` and is left
    untouched. One connection, used by one worker thread at a time; several processes may share a file.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        self.path = Path(path)
        self.create = create
        super().__init__(SQLITE, SQLiteFile(self.path, create=create))
