"""What the SQL turn stores share: the statements, the migrations runner, saving, loading and listing.

A dialect (SQLite, PostgreSQL) only opens connections and spells a few statements; every operation is one
synchronous function over a DB-API connection, run in a worker thread, so the logic exists once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from ..._exceptions import StoreError, UsageError
from ...turns import BLOCK_META_INFERENCE_ID, BLOCK_META_RESPONSE_ID, TURN_META_INFERENCE_ID, Turn, dumps_json
from ...turns import loads_json as turn_from_json
from .._store import RecordedEvent, TimedEvent, event_json
from ._schema import MIGRATIONS, SCHEMA_VERSION

__all__ = ["InferenceRecord", "SQLTurnStore", "SessionInfo", "SessionLease", "SnapshotInfo"]

R = TypeVar("R")

log = logging.getLogger("geppetto.session")


@dataclass(frozen=True)
class SnapshotInfo:
    seq: int
    turn_id: str
    inference_id: str | None
    saved_at: float | None
    blocks: int


@dataclass(frozen=True)
class InferenceRecord:
    """One inference a server ran: ``running`` until it ends ``completed``, ``failed`` or ``cancelled``."""

    session_id: str
    inference_id: str
    status: str
    worker: str | None
    prompt: str | None
    started_at: float
    ended_at: float | None
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


class SessionLease:
    """The right to run one session's inference, held until :meth:`release` (or until the process holding it
    exits: the lock is the database's or the file system's, so a killed worker frees it)."""

    def __init__(self, store: SQLTurnStore, session_id: str, key: int) -> None:
        self.store, self.session_id, self.key = store, session_id, key
        self.released = False

    async def release(self) -> None:
        if not self.released:
            self.released = True
            await asyncio.to_thread(self.store._release_key, self.key)


def lock_key(session_id: str) -> int:
    """A signed 63-bit number for ``session_id`` (an advisory-lock key, a lock-file offset)."""
    return int.from_bytes(hashlib.sha256(f"geppetto-session:{session_id}".encode()).digest()[:8], "big") >> 1


@dataclass(frozen=True)
class SessionInfo:
    """A line of ``geppetto sessions list``: the session, its snapshot count, last save and first prompt."""

    session_id: str
    snapshots: int
    updated_at: float | None
    blocks: int
    first_prompt: str
    provider: str = ""
    model: str = ""
    mode: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "snapshots": self.snapshots,
            "updated_at": self.updated_at,
            "blocks": self.blocks,
            "first_prompt": self.first_prompt,
            "provider": self.provider,
            "model": self.model,
            "mode": self.mode,
        }


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


class SQLTurnStore:
    """Session snapshots (and optional event logs) in a SQL database; each save is one transaction.

    Subclasses open connections (:meth:`_connection`), run transactions (:meth:`_transaction`) and name
    their dialect; the statements below are written with ``?`` placeholders and translated once.
    """

    dialect: ClassVar[str]
    placeholder: ClassVar[str] = "?"
    # A statement that makes the transaction the only writer of one session (None: the dialect's
    # transactions already serialize writers).
    lock_session: ClassVar[str | None] = None
    insert_session: ClassVar[str]
    db_errors: tuple[type[BaseException], ...]
    location: str

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

    def _migrate(self, conn: Any) -> None:
        with self._transaction(conn):
            self._lock_migrations(conn)
            self._exec(conn, "CREATE TABLE IF NOT EXISTS geppetto_schema (version INTEGER NOT NULL)")
            current = self._rows(conn, "SELECT max(version) FROM geppetto_schema")[0][0] or 0
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"session store {self.location} has schema version {current}, newer than this geppetto knows "
                    f"({SCHEMA_VERSION}); upgrade geppetto to open it"
                )
            for number in range(current + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[self.dialect][number - 1]:
                    self._exec(conn, statement)
                self._exec(conn, "INSERT INTO geppetto_schema (version) VALUES (?)", (number,))

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
    def _save(self, conn: Any, session_id: str, turn: Turn, document: str, events: list[tuple[Any, ...]] | None) -> int:
        with self._transaction(conn):
            self._ensure_session(conn, session_id)
            seq = self._rows(
                conn, "SELECT coalesce(max(seq), 0) + 1 FROM snapshots WHERE session_id = ?", (session_id,)
            )
            number = int(seq[0][0])
            self._exec(
                conn,
                "INSERT INTO snapshots (session_id, seq, turn_id, document, inference_id, saved_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, number, turn.id, document, TURN_META_INFERENCE_ID.get(turn.metadata), time.time()),
            )
            insert_blocks = "INSERT INTO blocks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            self._exec_many(conn, insert_blocks, block_rows(session_id, number, turn))
            if events:
                self._insert_events(conn, events)
            return number

    def _insert_events(self, conn: Any, events: list[tuple[Any, ...]]) -> None:
        statement = "INSERT INTO events (session_id, inference_id, seq, at, type, event) VALUES (?, ?, ?, ?, ?, ?)"
        self._exec_many(conn, statement, events)

    def _save_events(self, conn: Any, session_id: str, events: list[tuple[Any, ...]]) -> None:
        with self._transaction(conn):
            self._ensure_session(conn, session_id)
            self._insert_events(conn, events)

    # -- the TurnStore interface ----------------------------------------------------------------
    async def save_snapshot(self, session_id: str, turn: Turn, *, events: Sequence[TimedEvent] | None = None) -> None:
        """Append ``turn`` as the newest snapshot of ``session_id``, with the events of the inference that
        produced it when given; all in one transaction, so all of it or nothing."""
        inference_id = TURN_META_INFERENCE_ID.get(turn.metadata) or ""
        rows = _event_rows(session_id, inference_id, events) if events else None
        await self._run(self._save, session_id, turn, dumps_json(turn), rows)

    async def save_events(self, session_id: str, inference_id: str, events: Sequence[TimedEvent]) -> None:
        """Record the event log of an inference that produced no snapshot (it failed or was cancelled)."""
        if events:
            await self._run(self._save_events, session_id, _event_rows(session_id, inference_id, events))

    async def load_session(self, session_id: str) -> list[Turn]:
        """The snapshots of ``session_id``, oldest first (empty when unknown). A block kind this version does
        not know (written by a newer geppetto) reads back as ``other`` with its kind kept in the payload."""
        docs = await self._run(
            self._rows, "SELECT document FROM snapshots WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        source = f"{self.location} session {session_id}"
        return [turn_from_json(d, source=source, strict=False) for (d,) in docs]

    async def list_sessions(self) -> list[str]:
        """Every session id with a snapshot, in the order first saved."""
        rows = await self._run(
            self._rows,
            "SELECT id FROM sessions s WHERE EXISTS (SELECT 1 FROM snapshots WHERE session_id = s.id) "
            "ORDER BY created_seq",
        )
        return [r[0] for r in rows]

    async def resolve_session(self, prefix: str) -> str:
        """The session id that is ``prefix`` or the only one starting with it; a
        :class:`~geppetto.UsageError` names the candidates when several do, or says none does."""
        ids = await self.list_sessions()
        if prefix in ids:
            return prefix
        matches = [i for i in ids if i.startswith(prefix)] if prefix else []
        if len(matches) == 1:
            return matches[0]
        if matches:
            shown = ", ".join(matches[:10]) + (", ..." if len(matches) > 10 else "")
            raise UsageError(f"{len(matches)} sessions start with {prefix!r} ({shown}); give more of the id")
        raise UsageError(f"no session {prefix!r} in {self.location}; list them with `geppetto sessions list`")

    async def session_infos(self, *, include_empty: bool = False) -> list[SessionInfo]:
        """A summary of every session with a snapshot (and with ``include_empty``, every session made
        with :meth:`create_session` too), in the order first saved."""
        join = "LEFT JOIN" if include_empty else "JOIN"
        rows = await self._run(
            self._rows,
            f"""SELECT s.id, count(n.seq), coalesce(max(n.saved_at), max(s.created_at)),
                      (SELECT count(*) FROM blocks b WHERE b.session_id = s.id
                       AND b.snapshot_seq = (SELECT max(seq) FROM snapshots WHERE session_id = s.id)),
                      (SELECT b.payload FROM blocks b WHERE b.session_id = s.id AND b.kind = 'user'
                       ORDER BY b.snapshot_seq, b.position LIMIT 1),
                      (SELECT document FROM snapshots WHERE session_id = s.id ORDER BY seq DESC LIMIT 1)
               FROM sessions s {join} snapshots n ON n.session_id = s.id
               GROUP BY s.id, s.created_seq ORDER BY s.created_seq""",
        )
        return [
            SessionInfo(sid, int(count), updated, int(blocks), str(_payload(first).get("text", "")), *_engine_of(doc))
            for sid, count, updated, blocks, first, doc in rows
        ]

    async def snapshot_infos(self, session_id: str) -> list[SnapshotInfo]:
        """One line per snapshot of ``session_id``, oldest first (empty when unknown)."""
        rows = await self._run(
            self._rows,
            """SELECT n.seq, n.turn_id, n.inference_id, n.saved_at,
                      (SELECT count(*) FROM blocks b WHERE b.session_id = n.session_id AND b.snapshot_seq = n.seq)
               FROM snapshots n WHERE n.session_id = ? ORDER BY n.seq""",
            (session_id,),
        )
        return [SnapshotInfo(int(s), t, i, a, int(c)) for s, t, i, a, c in rows]

    async def load_events(self, session_id: str, inference_id: str | None = None) -> list[RecordedEvent]:
        """The recorded events of ``session_id`` (of one inference when given), in the order published."""
        # Inferences in the order they began, each one's events in the order published.
        statement = """SELECT e.inference_id, e.seq, e.at, e.type, e.event FROM events e
            JOIN (SELECT inference_id, min(at) AS began FROM events WHERE session_id = ? GROUP BY inference_id) f
              ON f.inference_id = e.inference_id
            WHERE e.session_id = ?"""
        params = [session_id, session_id]
        if inference_id is not None:
            statement += " AND e.inference_id = ?"
            params.append(inference_id)
        rows = await self._run(self._rows, statement + " ORDER BY f.began, e.inference_id, e.seq", params)
        return [RecordedEvent(i, int(s), float(a), t, _payload(e)) for i, s, a, t, e in rows]

    async def delete_session(self, session_id: str) -> None:
        """Remove ``session_id`` with its snapshots and events; :class:`~geppetto.StoreError` when it does
        not exist."""

        def delete(conn: Any) -> int:
            with self._transaction(conn):
                tables = ("events", "blocks", "snapshots", "inferences")
                for table, column in ((t, "session_id") for t in tables):
                    self._exec(conn, f"DELETE FROM {table} WHERE {column} = ?", (session_id,))
                cursor = conn.execute(self._sql("DELETE FROM sessions WHERE id = ?"), (session_id,))
                return int(cursor.rowcount)

        if await self._run(delete) == 0:
            raise StoreError(f"no session {session_id!r} in {self.location}; list them with `geppetto sessions list`")

    # -- sessions made ahead of their first snapshot, and the inferences a server runs ---------------
    async def create_session(self, session_id: str, settings: dict[str, Any]) -> None:
        """Make ``session_id`` with ``settings`` (a JSON object); :class:`~geppetto.UsageError` when it exists."""

        def create(conn: Any) -> int:
            with self._transaction(conn):
                if self._rows(conn, "SELECT 1 FROM sessions WHERE id = ?", (session_id,)):
                    return 0
                self._exec(conn, self.insert_session, (session_id,))
                self._exec(
                    conn,
                    "UPDATE sessions SET settings = ?, created_at = ? WHERE id = ?",
                    (json.dumps(settings), time.time(), session_id),
                )
                return 1

        if not await self._run(create):
            raise UsageError(f"session {session_id!r} already exists in {self.location}; pick another id")

    async def session_settings(self, session_id: str) -> dict[str, Any] | None:
        """The settings ``session_id`` was made with ({} for a session the CLI made), None when unknown."""
        rows = await self._run(self._rows, "SELECT settings FROM sessions WHERE id = ?", (session_id,))
        return _payload(rows[0][0]) if rows else None

    async def begin_inference(self, session_id: str, inference_id: str, *, worker: str, prompt: str) -> None:
        """Record ``inference_id`` as running (call it holding the session's lease)."""

        def begin(conn: Any) -> None:
            with self._transaction(conn):
                self._ensure_session(conn, session_id)
                self._exec(
                    conn,
                    "INSERT INTO inferences (session_id, inference_id, status, worker, prompt, started_at) "
                    "VALUES (?, ?, 'running', ?, ?, ?)",
                    (session_id, inference_id, worker, prompt, time.time()),
                )

        await self._run(begin)

    async def end_inference(self, session_id: str, inference_id: str, status: str, error: str | None = None) -> None:
        """Record how a running inference ended (``completed``, ``failed`` or ``cancelled``)."""
        await self._run(
            self._exec,
            "UPDATE inferences SET status = ?, ended_at = ?, error = ? "
            "WHERE session_id = ? AND inference_id = ? AND status = 'running'",
            (status, time.time(), error, session_id, inference_id),
        )

    async def inferences(self, session_id: str, *, status: str | None = None) -> list[InferenceRecord]:
        """The inferences recorded for ``session_id`` (only those with ``status`` when given), oldest first."""
        statement = (
            "SELECT session_id, inference_id, status, worker, prompt, started_at, ended_at, error "
            "FROM inferences WHERE session_id = ?"
        )
        params: list[Any] = [session_id]
        if status is not None:
            statement += " AND status = ?"
            params.append(status)
        rows = await self._run(self._rows, statement + " ORDER BY started_at, inference_id", params)
        return [InferenceRecord(*row) for row in rows]

    async def running_inferences(self) -> list[InferenceRecord]:
        """The inferences of every session recorded as running, oldest first (what a sweeper checks)."""
        rows = await self._run(
            self._rows,
            "SELECT session_id, inference_id, status, worker, prompt, started_at, ended_at, error "
            "FROM inferences WHERE status = 'running' ORDER BY started_at, inference_id",
        )
        return [InferenceRecord(*row) for row in rows]

    def close(self) -> None:
        """Release the connection(s); the store reopens on next use."""

    def __enter__(self) -> SQLTurnStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _backoff(seconds: float) -> Iterator[float]:
    """Pauses between attempts (0.05 s doubling to 2 s) until ``seconds`` from now have passed (an attempt
    under way then still ends: a connection's own timeout bounds it)."""
    deadline = time.monotonic() + seconds

    def pauses() -> Iterator[float]:
        delay = 0.05
        while time.monotonic() + delay <= deadline:
            yield delay
            delay = min(delay * 2, 2.0)

    return pauses()


def _event_rows(session_id: str, inference_id: str, events: Sequence[TimedEvent]) -> list[tuple[Any, ...]]:
    return [(session_id, inference_id, i, at, e.type, event_json(e)) for i, (at, e) in enumerate(events)]


def _engine_of(document: Any) -> tuple[str, str, str]:
    """Provider, model and Responses mode of a stored snapshot, from what the engine and the chat recorded
    in its metadata and data ("" where nothing says)."""
    doc = _payload(document)
    meta, data = _payload(doc.get("metadata")), _payload(doc.get("data"))
    chat = _payload(meta.get("geppetto.chat_engine@v1"))
    state = _payload(data.get("openai.responses_state@v1"))
    provider = chat.get("provider") or meta.get("geppetto.provider@v1") or ""
    model = chat.get("model") or meta.get("geppetto.model@v1") or ""
    mode = chat.get("mode") or state.get("mode") or ""
    return str(provider), str(model), str(mode)


def _payload(value: Any) -> dict[str, Any]:
    """A JSON column as a dict (PostgreSQL returns ``jsonb`` decoded, SQLite returns text; None: empty)."""
    data = json.loads(value) if isinstance(value, str | bytes) else value
    return data if isinstance(data, dict) else {}
