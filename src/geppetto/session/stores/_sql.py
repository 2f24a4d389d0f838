"""The SQL turn store: session snapshots (and their event logs) in SQLite or PostgreSQL, each save one
transaction.

One class, :class:`SQLTurnStore`, given a dialect and a database (``_dialect``): every operation is one
synchronous function over a DB-API connection, run in a worker thread, so the logic exists once. Saving,
loading and migrating are the plain functions of ``_sql_save``, ``_sql_load`` and ``_sql_migrate``; they
run their statements through the store's :meth:`~SQLTurnStore._rows` and :meth:`~SQLTurnStore._exec`."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from ..._exceptions import StoreError, UsageError
from ...tools import JournalRecord
from ...turns import TURN_META_INFERENCE_ID, FrozenBlock, LazyBlockList, Turn, dumps_json, freeze
from .._store import RecordedEvent, TimedEvent
from ._dialect import HELD_LOCK, Database, Dialect
from ._records import InferenceRecord, SessionInfo, SessionLease, SessionSummary, SnapshotInfo, lock_key
from ._sql_load import events_of, load_one, load_range
from ._sql_migrate import migrate, store_blocks_once, summarize_sessions
from ._sql_parts import _TIPS, _backoff, _conditions, _engine_of, _event_rows, _payload, _Tip, _usage_of
from ._sql_save import save, save_events

R = TypeVar("R")

log = logging.getLogger("geppetto.session")

__all__ = [
    "InferenceRecord",
    "SQLTurnStore",
    "SessionInfo",
    "SessionLease",
    "SessionSummary",
    "SnapshotInfo",
    "_backoff",
    "lock_key",
]


class SQLTurnStore:
    """Session snapshots (and optional event logs) in a SQL database; each save is one transaction.

    ``dialect`` spells the statements (written with ``?`` placeholders, translated once); ``database``
    opens connections, runs transactions and holds the cross-process locks of session leases.
    :class:`~geppetto.session.stores.SQLiteTurnStore` and
    :class:`~geppetto.session.stores.PostgresTurnStore` pick both.
    """

    reads_at_once = True

    """``save_snapshot`` reads all it keeps of the Turn before it first awaits (see ``MemoryTurnStore``)."""

    def __init__(self, dialect: Dialect, database: Database) -> None:
        self.dialect, self.database = dialect, database

    @property
    def location(self) -> str:
        """What messages name the store by: its file, or its URL without the password."""
        return self.database.location

    @property
    def reconnect_for(self) -> float:
        """Seconds an operation whose connection was lost is tried again for (0: not at all)."""
        return self.database.reconnect_for

    # -- one inference per session, across processes ------------------------------------------
    def _take_key(self, key: int) -> bool:
        with HELD_LOCK:
            held = self.database.held
            if key in held:  # the process-wide lock is reentrant; one holder per process is this set's job
                return False
            if not self.database.try_lock_key(key):
                return False
            held.add(key)
            return True

    def _release_key(self, key: int) -> None:
        with HELD_LOCK:
            if key in self.database.held:
                self.database.held.discard(key)
                self.database.unlock_key(key)

    async def try_lock(self, session_id: str) -> SessionLease | None:
        """A lease on ``session_id`` when no process holds one, else None. Released by
        :meth:`SessionLease.release`, or by the holder's exit."""
        key = lock_key(session_id)
        try:
            taken = await asyncio.to_thread(self._take_key, key)
        except self.database.errors as exc:
            raise self.database.refuse(exc) from exc
        return SessionLease(self, session_id, key) if taken else None

    async def lost_leases(self, leases: Iterable[SessionLease]) -> list[SessionLease]:
        """Those of ``leases`` this process no longer holds: its lock connection to the database dropped
        (a server restart) and another process took the session before this one could take it again.
        Checking also reconnects, so a lease nobody took meanwhile is held again."""
        try:
            keys = await asyncio.to_thread(self.database.check_leases)
        except self.database.errors as exc:
            raise self.database.refuse(exc) from exc
        return [lease for lease in leases if lease.key in keys]

    # -- running one operation: what the saving, loading and migrating functions use ----------
    def _connection(self) -> contextlib.AbstractContextManager[Any]:
        return self.database.connection(self._migrate)

    def _transaction(self, conn: Any) -> contextlib.AbstractContextManager[None]:
        return self.database.transaction(conn)

    def _migrate(self, conn: Any) -> None:
        migrate(self, conn)

    # The data steps of migrations 4 and 5, looked up on the store (so a test can make one fail).
    _store_blocks_once = store_blocks_once
    _summarize_sessions = summarize_sessions

    def _sql(self, statement: str) -> str:
        return self.dialect.sql(statement)

    def _rows(self, conn: Any, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = conn.execute(self._sql(statement), params)
        return list(cursor.fetchall())

    def _exec(self, conn: Any, statement: str, params: Sequence[Any] = ()) -> None:
        conn.execute(self._sql(statement), params)

    def _exec_many(self, conn: Any, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        conn.cursor().executemany(self._sql(statement), rows)

    def _call(self, fn: Callable[..., R], *args: Any) -> R:
        # An operation whose connection was lost runs again on a new one (each is one transaction, and a
        # database's transaction makes sure a commit whose answer was lost is not done twice).
        retries = _backoff(self.reconnect_for)
        while True:
            try:
                with self._connection() as conn:
                    return fn(conn, *args)
            except StoreError:
                raise
            except self.database.errors as exc:
                delay = next(retries, None) if self.database.connection_lost(exc) else None
                if delay is None:
                    raise self.database.refuse(exc) from exc
                log.warning("session store %s: connection lost (%s); trying again in %.2g s", self.location, exc, delay)
                time.sleep(delay)

    async def _run(self, fn: Callable[..., R], *args: Any) -> R:
        return await asyncio.to_thread(self._call, fn, *args)

    def _ensure_session(self, conn: Any, session_id: str) -> None:
        self._exec(conn, self.dialect.insert_session, (session_id,))
        if self.dialect.lock_session is not None:
            self._exec(conn, self.dialect.lock_session, (session_id,))

    # -- what this process remembers of each session's latest snapshot ---------------------------
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

    # -- saving ------------------------------------------------------------------------------
    async def save_snapshot(self, session_id: str, turn: Turn, *, events: Sequence[TimedEvent] | None = None) -> None:
        """Append ``turn`` as the newest snapshot of ``session_id``, with the events of the inference that
        produced it when given; all in one transaction, so all of it or nothing. Only blocks that are new
        or changed since the snapshot before are written (see docs/persistence.md)."""
        inference_id = TURN_META_INFERENCE_ID.get(turn.metadata) or ""
        rows = _event_rows(session_id, inference_id, events) if events else None
        blocks = turn.blocks
        tip = self._tips.get(session_id)
        if isinstance(blocks, LazyBlockList) and blocks.origin is not None:
            frozen = freeze(blocks, blocks.origin)
        else:  # a Turn from elsewhere: compared with what this store last held, block by block
            frozen = freeze(blocks, tip.frozen if tip is not None else None)
        document = dumps_json(Turn(id=turn.id, metadata=turn.metadata, data=turn.data))
        # Everything is read from ``turn`` before the first await (see ``TurnStore.reads_at_once``).
        ids = (turn.id, TURN_META_INFERENCE_ID.get(turn.metadata))
        self._remember(
            session_id, await self._run(functools.partial(save, self), session_id, ids, frozen, document, rows)
        )

    async def save_events(self, session_id: str, inference_id: str, events: Sequence[TimedEvent]) -> None:
        """Record the event log of an inference that produced no snapshot (it failed or was cancelled)."""
        if events:
            await self._run(
                functools.partial(save_events, self), session_id, _event_rows(session_id, inference_id, events)
            )

    # -- loading -----------------------------------------------------------------------------
    async def load_session(self, session_id: str) -> list[Turn]:
        """The snapshots of ``session_id``, oldest first (empty when unknown). A block kind this version does
        not know (written by a newer geppetto) reads back as ``other`` with its kind kept in the payload.
        Snapshots share the versions of their unchanged blocks (copied when read)."""
        return await self._run(functools.partial(load_range, self), session_id)

    async def load_latest(self, session_id: str) -> Turn | None:
        """The latest snapshot of ``session_id`` (None when it has none): one snapshot read, whatever the
        length of the history."""
        return await self._run(functools.partial(load_one, self), session_id, None)

    async def load_snapshot(self, session_id: str, seq: int) -> Turn | None:
        """Snapshot number ``seq`` (1 is the first) of ``session_id``, None when there is no such one."""
        return await self._run(functools.partial(load_one, self), session_id, seq)

    async def load_snapshots(self, session_id: str, first: int, last: int) -> list[Turn]:
        """Snapshots ``first`` to ``last`` (both included) of ``session_id``, oldest first: a window of the
        history, read in one pass over the blocks those snapshots hold."""
        return await self._run(functools.partial(load_range, self), session_id, first, last)

    def known_seq(self, session_id: str) -> int | None:
        """The number of the latest snapshot of ``session_id`` this process saved or read, without asking the
        database (None: none known). The database's own latest may be newer when another process saved since."""
        tip = self._tips.get(session_id)
        return tip.seq if tip is not None else None

    async def latest_seq(self, session_id: str) -> int:
        """The number of the latest snapshot of ``session_id`` (0 when it has none)."""
        rows = await self._run(
            self._rows, "SELECT coalesce(max(seq), 0) FROM snapshots WHERE session_id = ?", (session_id,)
        )
        return int(rows[0][0])

    async def load_events(
        self,
        session_id: str,
        inference_id: str | None = None,
        *,
        after: float | None = None,
        until: float | None = None,
    ) -> list[RecordedEvent]:
        """The recorded events of ``session_id`` (of one inference when given), in the order published;
        with ``after``/``until`` (Unix seconds), only those published in that window of time (after ``after``,
        up to ``until`` included), e.g. between the saves of two snapshots."""
        return await self._run(functools.partial(events_of, self), session_id, inference_id, after, until)

    # -- listing and deleting sessions -------------------------------------------------------
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
                      (SELECT length FROM snapshots WHERE session_id = s.id ORDER BY seq DESC LIMIT 1),
                      s.first_prompt,
                      (SELECT document FROM snapshots WHERE session_id = s.id ORDER BY seq DESC LIMIT 1)
               FROM sessions s {join} snapshots n ON n.session_id = s.id
               GROUP BY s.id, s.created_seq, s.first_prompt ORDER BY s.created_seq""",
        )
        return [
            SessionInfo(sid, int(count), updated, int(blocks or 0), first or "", *_engine_of(doc), _usage_of(doc))
            for sid, count, updated, blocks, first, doc in rows
        ]

    async def session_summaries(self, *, limit: int | None = None) -> tuple[list[SessionSummary], bool]:
        """The kept summary of each session with a snapshot, in the order first saved; with ``limit``, the
        last ``limit`` sessions only. Also whether there are more sessions than returned. One row per
        session returned, whatever the length of its history (the dashboard's source)."""
        statement = """SELECT s.id, m.events, m.totals, s.first_prompt FROM sessions s
            LEFT JOIN session_summaries m ON m.session_id = s.id
            WHERE EXISTS (SELECT 1 FROM snapshots WHERE session_id = s.id) ORDER BY s.created_seq DESC"""
        params: list[Any] = []
        if limit is not None:
            statement += " LIMIT ?"
            params.append(limit + 1)
        rows = await self._run(self._rows, statement, params)
        more = limit is not None and len(rows) > limit
        chosen = rows[:limit] if limit is not None else rows
        return [
            SessionSummary(sid, int(events or 0), _payload(totals) if totals is not None else None, first or "")
            for sid, events, totals, first in reversed(chosen)
        ], more

    async def snapshot_infos(
        self, session_id: str, *, before: int | None = None, limit: int | None = None
    ) -> list[SnapshotInfo]:
        """One line per snapshot of ``session_id``, oldest first (empty when unknown); with ``limit``, the
        last ``limit`` snapshots before number ``before`` (before the end when None): a page of history."""
        statement = "SELECT seq, turn_id, inference_id, saved_at, length FROM snapshots WHERE session_id = ?"
        params: list[Any] = [session_id]
        if before is not None:
            statement += " AND seq < ?"
            params.append(before)
        statement += " ORDER BY seq DESC"
        if limit is not None:
            statement += " LIMIT ?"
            params.append(limit)
        rows = await self._run(self._rows, statement, params)
        return [SnapshotInfo(int(s), t, i, a, int(c or 0)) for s, t, i, a, c in reversed(rows)]

    async def delete_session(self, session_id: str) -> None:
        """Remove ``session_id`` with its snapshots and events; :class:`~geppetto.StoreError` when it does
        not exist."""

        def delete(conn: Any) -> int:
            with self._transaction(conn):
                for table in ("spans", "block_versions"):
                    self._exec(
                        conn,
                        f"DELETE FROM {table} WHERE sk IN (SELECT created_seq FROM sessions WHERE id = ?)",
                        (session_id,),
                    )
                for table in (
                    "events",
                    "snapshots",
                    "inferences",
                    "session_summaries",
                    "background_responses",
                    "journal",
                ):
                    self._exec(conn, f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
                self._tips.pop(session_id, None)
                cursor = conn.execute(self._sql("DELETE FROM sessions WHERE id = ?"), (session_id,))
                return int(cursor.rowcount)

        if await self._run(delete) == 0:
            raise StoreError(f"no session {session_id!r} in {self.location}; list them with `geppetto sessions list`")

    # -- what each Responses endpoint keeps (docs/responses.md) ----------------------------------------
    async def load_endpoint_verdict(self, base_url: str, model: str) -> dict[str, Any] | None:
        """The verdict saved for the endpoint (base URL and model), None when there is none."""
        rows = await self._run(
            self._rows, "SELECT verdict FROM endpoint_verdicts WHERE base_url = ? AND model = ?", (base_url, model)
        )
        return _payload(rows[0][0]) if rows else None

    async def save_endpoint_verdict(self, base_url: str, model: str, verdict: dict[str, Any]) -> None:
        """Keep ``verdict`` for the endpoint, replacing the one saved before."""

        def save(conn: Any) -> None:
            with self._transaction(conn):
                self._exec(
                    conn,
                    "INSERT INTO endpoint_verdicts (base_url, model, verdict, learned_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (base_url, model) DO UPDATE SET verdict = excluded.verdict, "
                    "learned_at = excluded.learned_at",
                    (base_url, model, json.dumps(verdict), float(verdict.get("learned_at") or time.time())),
                )

        await self._run(save)

    # -- sessions made ahead of their first snapshot, and the inferences a server runs ---------------
    async def create_session(self, session_id: str, settings: dict[str, Any]) -> None:
        """Make ``session_id`` with ``settings`` (a JSON object); :class:`~geppetto.UsageError` when it exists."""

        def create(conn: Any) -> int:
            with self._transaction(conn):
                if self._rows(conn, "SELECT 1 FROM sessions WHERE id = ?", (session_id,)):
                    return 0
                self._exec(conn, self.dialect.insert_session, (session_id,))
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

    async def inferences(
        self,
        session_id: str,
        *,
        status: str | None = None,
        limit: int | None = None,
        after: float | None = None,
        until: float | None = None,
    ) -> list[InferenceRecord]:
        """The inferences recorded for ``session_id`` (only those with ``status`` when given), oldest first;
        with ``limit``, the last ``limit`` of them; with ``after``/``until``, those started in that window."""
        where, bounds = _conditions(("status =", status), ("started_at >", after), ("started_at <=", until))
        statement = (
            "SELECT session_id, inference_id, status, worker, prompt, started_at, ended_at, error "
            f"FROM inferences WHERE session_id = ?{where}"
        )
        params: list[Any] = [session_id, *bounds]
        if limit is None:
            rows = await self._run(self._rows, statement + " ORDER BY started_at, inference_id", params)
            return [InferenceRecord(*row) for row in rows]
        params.append(limit)
        rows = await self._run(self._rows, statement + " ORDER BY started_at DESC, inference_id DESC LIMIT ?", params)
        return [InferenceRecord(*row) for row in reversed(rows)]

    async def running_inferences(self) -> list[InferenceRecord]:
        """The inferences of every session recorded as running, oldest first (what a sweeper checks)."""
        rows = await self._run(
            self._rows,
            "SELECT session_id, inference_id, status, worker, prompt, started_at, ended_at, error "
            "FROM inferences WHERE status = 'running' ORDER BY started_at, inference_id",
        )
        return [InferenceRecord(*row) for row in rows]

    # -- the journal of side effects (geppetto.tools._journal) -------------------------------------------
    async def journal_write(self, session_id: str, inference_id: str, entry: str, record: dict[str, Any]) -> None:
        """Write ``record`` under ``entry`` of the inference (one row: a call's start, then its result)."""
        await self._run(
            self._exec,
            "INSERT INTO journal (session_id, inference_id, entry, record, at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (session_id, inference_id, entry) DO UPDATE SET record = excluded.record",
            (session_id, inference_id, entry, json.dumps(record, ensure_ascii=False), time.time()),
        )

    async def journal_read(self, session_id: str) -> list[JournalRecord]:
        """Every journal row of ``session_id``, in the order first written."""
        rows = await self._run(
            self._rows,
            "SELECT inference_id, entry, record, at FROM journal WHERE session_id = ? ORDER BY at, entry",
            (session_id,),
        )
        return [JournalRecord(str(i), str(e), _payload(r), float(a)) for i, e, r, a in rows]

    async def journal_clear(self, session_id: str) -> None:
        """Delete the journal of ``session_id`` (one of its inferences completed)."""
        await self._run(self._exec, "DELETE FROM journal WHERE session_id = ?", (session_id,))

    def close(self) -> None:
        """Release the connection(s); the store reopens on next use."""
        self.database.close()

    def __enter__(self) -> SQLTurnStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
