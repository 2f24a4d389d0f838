"""The base of the SQL turn stores: dialect hooks, leases, and running one operation on a connection."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, TypeVar

from ..._exceptions import StoreError
from ...turns._cow import FrozenBlock
from ._records import SessionLease, lock_key
from ._sql_parts import _TIPS, _backoff, _Tip

R = TypeVar("R")

log = logging.getLogger("geppetto.session")

__all__ = ["SQLBase"]


class SQLBase:
    """The machinery every SQL store layer builds on: a dialect's connections and statements, leases (one
    inference per session across processes), running an operation in a worker thread, and what this
    process remembers of each session's latest snapshot."""

    dialect: ClassVar[str]

    placeholder: ClassVar[str] = "?"

    # A statement that makes the transaction the only writer of one session (None: the dialect's
    # transactions already serialize writers).
    lock_session: ClassVar[str | None] = None

    insert_session: ClassVar[str]

    db_errors: tuple[type[BaseException], ...]

    location: str

    reads_at_once = True

    """``save_snapshot`` reads all it keeps of the Turn before it first awaits (see ``MemoryTurnStore``)."""

    # -- what a dialect provides ---------------------------------------------------------------
    def _connection(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def _transaction(self, conn: Any) -> contextlib.AbstractContextManager[None]:
        raise NotImplementedError

    def _lock_migrations(self, conn: Any) -> None:
        """Called first inside the migration transaction, to keep two processes from migrating at once."""

    def _refuse(self, exc: BaseException) -> StoreError:
        return StoreError(f"session store {self.location} failed: {exc}")

    reconnect_for: float = 0.0

    """Seconds an operation whose connection was lost is tried again for (0: not at all)."""

    def _connection_lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the connection went away (a new one may succeed), not that the statement failed."""
        return False

    def _check_leases(self) -> set[int]:
        """The keys of leases this process held and has lost (its lock connection dropped and another
        process took them); each is reported once."""
        return set()

    def _try_lock_key(self, key: int) -> bool:
        """Take the cross-process lock ``key`` without waiting (True when taken)."""
        raise NotImplementedError

    def _unlock_key(self, key: int) -> None:
        raise NotImplementedError

    # -- one inference per session, across processes ------------------------------------------
    _held_lock = threading.Lock()

    @functools.cached_property
    def _held(self) -> set[int]:
        """The sessions this process holds a lease on (under ``_held_lock``)."""
        return set()

    def _take_key(self, key: int) -> bool:
        with self._held_lock:
            held = self._held
            if key in held:  # the process-wide lock is reentrant; one holder per process is this set's job
                return False
            if not self._try_lock_key(key):
                return False
            held.add(key)
            return True

    def _release_key(self, key: int) -> None:
        with self._held_lock:
            if key in self._held:
                self._held.discard(key)
                self._unlock_key(key)

    async def try_lock(self, session_id: str) -> SessionLease | None:
        """A lease on ``session_id`` when no process holds one, else None. Released by
        :meth:`SessionLease.release`, or by the holder's exit."""
        key = lock_key(session_id)
        try:
            taken = await asyncio.to_thread(self._take_key, key)
        except self.db_errors as exc:
            raise self._refuse(exc) from exc
        return SessionLease(self, session_id, key) if taken else None

    async def lost_leases(self, leases: Iterable[SessionLease]) -> list[SessionLease]:
        """Those of ``leases`` this process no longer holds: its lock connection to the database dropped
        (a server restart) and another process took the session before this one could take it again.
        Checking also reconnects, so a lease nobody took meanwhile is held again."""
        try:
            keys = await asyncio.to_thread(self._check_leases)
        except self.db_errors as exc:
            raise self._refuse(exc) from exc
        return [lease for lease in leases if lease.key in keys]

    # -- shared machinery ----------------------------------------------------------------------
    def _sql(self, statement: str) -> str:
        return statement if self.placeholder == "?" else statement.replace("?", self.placeholder)

    def _rows(self, conn: Any, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = conn.execute(self._sql(statement), params)
        return list(cursor.fetchall())

    def _exec(self, conn: Any, statement: str, params: Sequence[Any] = ()) -> None:
        conn.execute(self._sql(statement), params)

    def _exec_many(self, conn: Any, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        conn.cursor().executemany(self._sql(statement), rows)

    def _call(self, fn: Callable[..., R], *args: Any) -> R:
        # An operation whose connection was lost runs again on a new one (each is one transaction, and a
        # dialect's _transaction makes sure a commit whose answer was lost is not done twice).
        retries = _backoff(self.reconnect_for)
        while True:
            try:
                with self._connection() as conn:
                    return fn(conn, *args)
            except StoreError:
                raise
            except self.db_errors as exc:
                delay = next(retries, None) if self._connection_lost(exc) else None
                if delay is None:
                    raise self._refuse(exc) from exc
                log.warning("session store %s: connection lost (%s); trying again in %.2g s", self.location, exc, delay)
                time.sleep(delay)

    async def _run(self, fn: Callable[..., R], *args: Any) -> R:
        return await asyncio.to_thread(self._call, fn, *args)

    def _ensure_session(self, conn: Any, session_id: str) -> None:
        self._exec(conn, self.insert_session, (session_id,))
        if self.lock_session is not None:
            self._exec(conn, self.lock_session, (session_id,))

    # -- operations (each runs in a worker thread) ----------------------------------------------
    @functools.cached_property
    def _tips(self) -> dict[str, _Tip]:
        return {}

    @functools.cached_property
    def _marker(self) -> object:
        """What a frozen block records as the store that keeps it (see ``FrozenBlock.stored``)."""
        return object()

    def _vid(self, block: FrozenBlock, sk: int) -> int | None:
        stored = block.__dict__.get("stored")
        if stored is not None and stored[0] is self._marker and stored[1] == sk:
            return int(stored[2])
        return None

    def _sk(self, conn: Any, session_id: str) -> int:
        return int(self._rows(conn, "SELECT created_seq FROM sessions WHERE id = ?", (session_id,))[0][0])

    def _source(self, session_id: str) -> str:
        return f"{self.location} session {session_id}"

    def _remember(self, session_id: str, tip: _Tip) -> None:
        tips = self._tips
        tips.pop(session_id, None)
        tips[session_id] = tip
        if len(tips) > _TIPS:
            del tips[next(iter(tips))]
