"""A :class:`~geppetto.session.TurnStore` in PostgreSQL (psycopg 3 with a connection pool, in worker threads)."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..._exceptions import StoreError
from ._sql import SQLTurnStore

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

__all__ = ["PostgresTurnStore", "redact_url"]

# Any number works as long as no other program takes the same advisory lock for another purpose.
_MIGRATION_LOCK = 0x6765707065747401


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (URL and ``key=value`` forms)."""
    url = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", url)
    return re.sub(r"(password\s*=\s*)\S+", r"\1***", url)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class PostgresTurnStore(SQLTurnStore):
    """Session snapshots in a PostgreSQL database: the same schema and behaviour as
    :class:`~geppetto.session.stores.SQLiteTurnStore`, for many processes and machines at once.

    ``url`` is a libpq connection string (``postgresql://user@host:5432/db``; a schema is chosen with
    ``?options=-csearch_path%3Dmyschema``). The first use connects, applies migrations (under an advisory
    lock, so concurrent processes migrate once) and opens a pool of up to ``max_connections``.
    JSON columns are ``jsonb``, so provenance queries can use ``payload->>'text'``.
    """

    dialect = "postgres"
    placeholder = "%s"
    insert_session = "INSERT INTO sessions (id) VALUES (?) ON CONFLICT (id) DO NOTHING"
    # Two processes saving to one session take turns, so each reads the true next snapshot number.
    lock_session = "SELECT id FROM sessions WHERE id = ? FOR UPDATE"

    def __init__(self, url: str, *, max_connections: int = 8, connect_timeout: float = 10.0) -> None:
        try:
            import psycopg
            import psycopg_pool  # noqa: F401
        except ImportError as exc:
            raise StoreError(
                f"PostgreSQL stores need psycopg 3 with its pool ({exc.name} is missing); "
                "install them with: pip install 'geppetto[postgres]'"
            ) from None
        self.db_errors = (psycopg.Error,)
        self.url = url
        self.location = redact_url(url)
        self.max_connections = max_connections
        self.connect_timeout = connect_timeout
        self._pool: ConnectionPool[Any] | None = None
        self._lock = threading.Lock()
        self._lock_conn: Any = None

    def _open(self) -> ConnectionPool[Any]:
        import psycopg
        from psycopg_pool import ConnectionPool

        try:
            with psycopg.connect(
                self.url, autocommit=True, connect_timeout=max(1, round(self.connect_timeout))
            ) as conn:
                self._migrate(conn)
        except psycopg.errors.DuplicateTable as exc:
            raise StoreError(
                f"the PostgreSQL database {self.location} already has a table geppetto did not create "
                f"({_first_line(exc)}); point the URL at another database or schema "
                "(for example ?options=-csearch_path%3Dgeppetto)"
            ) from exc
        except psycopg.OperationalError as exc:
            raise StoreError(
                f"cannot reach the PostgreSQL session store {self.location}: {_first_line(exc)}; "
                "start the server or fix the URL"
            ) from exc
        return ConnectionPool(
            self.url,
            min_size=1,
            max_size=self.max_connections,
            kwargs={"autocommit": True, "connect_timeout": max(1, round(self.connect_timeout))},
            timeout=self.connect_timeout,
            open=True,
            name="geppetto-store",
        )

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        with self._lock:
            if self._pool is None:
                self._pool = self._open()
            pool = self._pool
        with pool.connection() as conn:
            yield conn

    @contextlib.contextmanager
    def _transaction(self, conn: Any) -> Iterator[None]:
        with conn.transaction():
            yield

    def _lock_migrations(self, conn: Any) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))

    # A session-level advisory lock per running inference, all on one connection of this process: the
    # server frees them when the process (so the connection) ends, which is what frees a killed worker's.
    def _try_lock_key(self, key: int) -> bool:
        import psycopg

        if self._lock_conn is None or self._lock_conn.closed:
            self._lock_conn = psycopg.connect(
                self.url, autocommit=True, connect_timeout=max(1, round(self.connect_timeout))
            )
        try:
            row = self._lock_conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        except psycopg.OperationalError:
            self._lock_conn.close()  # every lock it held is gone with it; the next call reconnects
            self._lock_conn = None
            raise
        return bool(row and row[0])

    def _unlock_key(self, key: int) -> None:
        import psycopg

        if self._lock_conn is not None and not self._lock_conn.closed:
            try:
                self._lock_conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            except psycopg.Error:
                self._lock_conn.close()
                self._lock_conn = None

    def _refuse(self, exc: BaseException) -> StoreError:
        return StoreError(
            f"PostgreSQL session store {self.location} failed: {_first_line(exc)}; check the server is up and reachable"
        )

    def close(self) -> None:
        """Close the pool (the store reopens it on next use)."""
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
        with self._held_lock:
            if self._lock_conn is not None:
                self._lock_conn.close()
                self._lock_conn = None
                self._held.clear()
