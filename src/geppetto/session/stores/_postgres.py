"""A :class:`~geppetto.session.TurnStore` in PostgreSQL (psycopg 3 with a connection pool, in worker threads):
the PostgreSQL dialect, the database the store's operations run on, and :class:`PostgresTurnStore`, which puts
them together."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..._exceptions import StoreError
from ..._extras import install_hint
from ..._redact import redact_url
from ._dialect import HELD_LOCK, Dialect
from ._sql import SQLTurnStore, _backoff

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

__all__ = ["POSTGRES", "PostgresDatabase", "PostgresTurnStore", "redact_url"]

log = logging.getLogger("geppetto.session")

# admin_shutdown, crash_shutdown, cannot_connect_now: the server is stopping, or starting after a restart.
_SERVER_GONE = frozenset({"57P01", "57P02", "57P03"})

# Any number works as long as no other program takes the same advisory lock for another purpose.
_MIGRATION_LOCK = 0x6765707065747401


POSTGRES = Dialect(
    "postgres",
    insert_session="INSERT INTO sessions (id) VALUES (?) ON CONFLICT (id) DO NOTHING",
    placeholder="%s",
    # Two processes saving to one session take turns, so each reads the true next snapshot number.
    lock_session="SELECT id FROM sessions WHERE id = ? FOR UPDATE",
)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class PostgresDatabase:
    """A PostgreSQL database as a store's database: a pool of up to ``max_connections`` connections, and one
    more holding the session leases (advisory locks) of this process."""

    def __init__(
        self, url: str, *, max_connections: int = 8, connect_timeout: float = 3.0, reconnect_for: float = 15.0
    ) -> None:
        try:
            import psycopg
            import psycopg_pool  # noqa: F401
        except ImportError as exc:
            raise StoreError(
                f"PostgreSQL stores need psycopg 3 with its pool ({exc.name} is missing); "
                f"install them with: {install_hint('postgres')}"
            ) from None
        self.errors: tuple[type[BaseException], ...] = (psycopg.Error,)
        self.url = url
        self.location = redact_url(url)
        self.max_connections = max_connections
        self.connect_timeout = connect_timeout
        self.reconnect_for = reconnect_for
        self._pool: ConnectionPool[Any] | None = None
        self._lock = threading.Lock()
        self._lock_conn: Any = None
        self._lost: set[int] = set()
        self.held: set[int] = set()

    def _open(self, prepare: Callable[[Any], None]) -> ConnectionPool[Any]:
        import psycopg

        try:
            with psycopg.connect(
                self.url, autocommit=True, connect_timeout=max(1, round(self.connect_timeout))
            ) as conn:
                prepare(conn)
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
        return self._new_pool()

    def _new_pool(self) -> ConnectionPool[Any]:
        from psycopg_pool import ConnectionPool

        return ConnectionPool(
            self.url,
            check=ConnectionPool.check_connection,  # a connection a server restart broke is replaced, not used
            min_size=1,
            max_size=self.max_connections,
            kwargs={"autocommit": True, "connect_timeout": max(1, round(self.connect_timeout))},
            timeout=self.connect_timeout,
            open=True,
            name="geppetto-store",
        )

    @contextlib.contextmanager
    def connection(self, prepare: Callable[[Any], None]) -> Iterator[Any]:
        from psycopg_pool import PoolTimeout

        with self._lock:
            if self._pool is None:
                self._pool = self._open(prepare)
            pool = self._pool
        try:
            conn = pool.getconn()
        except PoolTimeout:
            # After an outage the pool waits longer and longer between its attempts (1 s, 2 s, 4 s...): a
            # server that is back meanwhile gets a pool made now; one still down fails the call as it is.
            if not self._server_answers():
                raise
            pool = self._renew_pool(pool)
            conn = pool.getconn()
        try:
            with conn:
                yield conn
        finally:
            pool.putconn(conn)

    def _server_answers(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, round(self.connect_timeout))):
                return True
        except psycopg.OperationalError:
            return False

    def _renew_pool(self, stale: ConnectionPool[Any]) -> ConnectionPool[Any]:
        with self._lock:
            fresh = self._pool
            if fresh is stale or fresh is None:
                fresh = self._pool = self._new_pool()
                log.info("session store %s: the server is back; a new connection pool replaces the old", self.location)
        stale.close(timeout=0)
        return fresh

    @contextlib.contextmanager
    def transaction(self, conn: Any) -> Iterator[None]:
        import psycopg

        # The transaction's id, so a COMMIT whose answer the connection lost can be looked up: retrying a
        # transaction that did commit would save it twice.
        xid, body_done = None, False
        try:
            with conn.transaction():
                xid = conn.execute("SELECT txid_current()").fetchone()[0]
                yield
                body_done = True
        except psycopg.OperationalError as exc:
            if body_done and xid is not None and self.connection_lost(exc) and self._committed(xid):
                return
            raise

    def _committed(self, xid: int) -> bool:
        """Whether transaction ``xid`` committed, asked on a new connection; a :class:`StoreError` when the
        server does not say within ``reconnect_for`` seconds (doing it again could do it twice)."""
        import psycopg

        for delay in _backoff(self.reconnect_for):
            try:
                with psycopg.connect(
                    self.url, autocommit=True, connect_timeout=max(1, round(self.connect_timeout))
                ) as conn:
                    row = conn.execute("SELECT txid_status(%s)", (xid,)).fetchone()
            except psycopg.OperationalError:
                time.sleep(delay)
                continue
            status = row[0] if row else None
            if status == "in progress":  # the server has not noticed the dropped connection yet
                time.sleep(delay)
                continue
            return status == "committed"
        raise StoreError(
            f"PostgreSQL session store {self.location}: the connection dropped while a transaction committed and "
            f"the server did not say within {self.reconnect_for:g} s whether it did (transaction {xid}); "
            "check the server, then look for the change before doing it again"
        )

    def connection_lost(self, exc: BaseException) -> bool:
        """True for errors that mean a connection in use went away (a server restart), which a new
        connection may cure; never for an error the statement itself caused (a constraint, bad SQL, a lock
        timeout), nor for a pool that found no connection within ``connect_timeout`` (the server is down:
        waiting longer would only make the caller's 503 slower)."""
        import psycopg
        from psycopg_pool import PoolTimeout

        if isinstance(exc, PoolTimeout):  # an OperationalError too
            return False

        if not isinstance(exc, psycopg.OperationalError):
            return False
        state = getattr(exc, "sqlstate", None)
        return state is None or state.startswith("08") or state in _SERVER_GONE

    def lock_migrations(self, conn: Any) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))

    # A session-level advisory lock per running inference, all on one connection of this process: the
    # server frees them when the process (so the connection) ends, which is what frees a killed worker's.
    # The connection can also drop while the process lives (a server restart): its locks are gone then,
    # and the next use takes them all again on a new one; those another process took meanwhile are lost.
    def _lock_connection(self) -> Any:
        """The live lock connection (called holding ``HELD_LOCK``)."""
        import psycopg

        if self._lock_conn is not None and not self._lock_conn.closed:
            return self._lock_conn
        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, round(self.connect_timeout)))
        try:
            for key in sorted(self.held):
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                if not (row and row[0]):
                    self.held.discard(key)
                    self._lost.add(key)
        except BaseException:
            conn.close()
            raise
        self._lock_conn = conn
        return conn

    def _drop_lock_connection(self) -> None:
        if self._lock_conn is not None:
            self._lock_conn.close()  # every lock it held is gone with it; the next use reconnects
            self._lock_conn = None

    def try_lock_key(self, key: int) -> bool:
        import psycopg

        # The lock connection lives as long as the process: one from before a server restart fails at its
        # first use, and the lock is asked again once on a new one (which also takes the held ones again).
        for attempt in (1, 2):
            conn = self._lock_connection()
            try:
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            except psycopg.OperationalError as exc:
                self._drop_lock_connection()
                if attempt == 2 or not self.connection_lost(exc):
                    raise
                continue
            return bool(row and row[0])
        raise AssertionError("unreachable")

    def unlock_key(self, key: int) -> None:
        import psycopg

        if self._lock_conn is not None and not self._lock_conn.closed:
            try:
                self._lock_conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            except psycopg.Error:
                self._drop_lock_connection()

    def check_leases(self) -> set[int]:
        import psycopg

        with HELD_LOCK:
            if self.held and self._lock_conn is not None and not self._lock_conn.closed:
                try:
                    self._lock_conn.execute("SELECT 1")
                except psycopg.Error:
                    self._drop_lock_connection()
            if self.held:
                # The server is away: nobody can take the sessions meanwhile; asked again next time.
                with contextlib.suppress(psycopg.OperationalError):
                    self._lock_connection()
            lost, self._lost = self._lost, set()
            return lost

    def refuse(self, exc: BaseException) -> StoreError:
        return StoreError(
            f"PostgreSQL session store {self.location} failed: {_first_line(exc)}; check the server is up and reachable"
        )

    def close(self) -> None:
        """Close the pool and the lock connection (the store reopens them on next use)."""
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
        with HELD_LOCK:
            if self._lock_conn is not None:
                self._lock_conn.close()
                self._lock_conn = None
                self.held.clear()


class PostgresTurnStore(SQLTurnStore):
    """Session snapshots in a PostgreSQL database: the same schema and behaviour as
    :class:`~geppetto.session.stores.SQLiteTurnStore`, for many processes and machines at once.

    ``url`` is a libpq connection string (``postgresql://user@host:5432/db``; a schema is chosen with
    ``?options=-csearch_path%3Dmyschema``). The first use connects, applies migrations (under an advisory
    lock, so concurrent processes migrate once) and opens a pool of up to ``max_connections``.
    An operation whose connection is lost (a server restart) is tried again on a new one for up to
    ``reconnect_for`` seconds; a transaction whose COMMIT lost its answer is looked up, never done twice.
    A server that is down is reported (:class:`~geppetto.StoreError`) once no connection came within
    ``connect_timeout`` seconds (3 by default), so a request during an outage is answered quickly.
    JSON columns are ``jsonb``, so provenance queries can use ``payload->>'text'``.
    """

    def __init__(
        self, url: str, *, max_connections: int = 8, connect_timeout: float = 3.0, reconnect_for: float = 15.0
    ) -> None:
        database = PostgresDatabase(
            url, max_connections=max_connections, connect_timeout=connect_timeout, reconnect_for=reconnect_for
        )
        self.url, self.max_connections, self.connect_timeout = url, max_connections, connect_timeout
        super().__init__(POSTGRES, database)
        self.database: PostgresDatabase = database

    @property
    def _lock_conn(self) -> Any:
        """The connection holding this process's session leases (None: none open yet)."""
        return self.database._lock_conn
