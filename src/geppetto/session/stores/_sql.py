"""What the SQL turn stores share: the statements, the migrations runner, saving, loading and listing.

A dialect (SQLite, PostgreSQL) only opens connections and spells a few statements; every operation is one
synchronous function over a DB-API connection, run in a worker thread, so the logic exists once."""

from __future__ import annotations

import json
import time
from typing import Any

from ..._exceptions import StoreError, UsageError
from ._records import InferenceRecord, SessionInfo, SessionLease, SessionSummary, SnapshotInfo, lock_key
from ._sql_migrate import SQLMigrations
from ._sql_parts import _backoff, _conditions, _engine_of, _payload, _usage_of

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


class SQLTurnStore(SQLMigrations):
    """Session snapshots (and optional event logs) in a SQL database; each save is one transaction.

    Subclasses open connections (:meth:`_connection`), run transactions (:meth:`_transaction`) and name
    their dialect; the statements below are written with ``?`` placeholders and translated once.
    """

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
                for table in ("events", "snapshots", "inferences", "session_summaries", "background_responses"):
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

    def close(self) -> None:
        """Release the connection(s); the store reopens on next use."""

    def __enter__(self) -> SQLTurnStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
