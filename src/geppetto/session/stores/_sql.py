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
from ...turns import BLOCK_META_INFERENCE_ID, BLOCK_META_RESPONSE_ID, TURN_META_INFERENCE_ID, Block, Turn, dumps_json
from ...turns import loads_json as turn_from_json
from ...turns._cow import Frozen, FrozenBlock, LazyBlockList, freeze, frozen_from
from ...turns._serde import block_to_json, blocks_from_json
from .._store import RecordedEvent, TimedEvent, event_json
from ._schema import MIGRATIONS, SCHEMA_VERSION, STORE_BLOCKS_ONCE, SUMMARIZE_SESSIONS

__all__ = ["InferenceRecord", "SQLTurnStore", "SessionInfo", "SessionLease", "SessionSummary", "SnapshotInfo"]

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
    usage: dict[str, Any] | None = None
    """The session's usage totals as its latest snapshot recorded them (``SessionUsage.to_dict()``; None when
    its engine reported no usage)."""

    def to_dict(self) -> dict[str, Any]:
        usage = {"usage": self.usage} if self.usage is not None else {}  # absent for a session with none
        return {
            "session_id": self.session_id,
            "snapshots": self.snapshots,
            "updated_at": self.updated_at,
            "blocks": self.blocks,
            "first_prompt": self.first_prompt,
            "provider": self.provider,
            "model": self.model,
            "mode": self.mode,
            **usage,
        }


@dataclass(frozen=True)
class SessionSummary:
    """What the store kept for a session at save time: how many events it recorded (0: no event log) and
    the request totals of the dashboard summed over them (``web.session_totals``'s ``totals``; None when
    there are none)."""

    session_id: str
    events: int
    totals: dict[str, Any] | None
    first_prompt: str = ""
    """The session's first user text (what the dashboard names it by)."""


@dataclass
class _Tip:
    """What a store knows of a session's latest snapshot, as this process last wrote or read it."""

    sk: int
    seq: int
    frozen: Frozen


class _Plan:
    """The rows one save writes: the positions whose span ends, and the (position, block) pairs whose
    span begins (each block a version stored already, or to store)."""

    def __init__(self, close: list[int], open_: list[tuple[int, FrozenBlock]]) -> None:
        self.close, self.open = close, open_


def _diff(new: Frozen, old: Frozen) -> _Plan | None:
    """The spans that differ between ``old`` and ``new`` (a snapshot derived from it), reading only what
    the derivation says may have changed; None when ``new`` does not descend from ``old`` closely."""
    keep = len(new.blocks)
    patched: set[int] = set()
    node: Frozen | None = new
    for _ in range(64):
        if node is None or node is old:
            break
        keep = min(keep, node.keep)
        patched.update(node.patches)
        node = node.parent
    if node is not old:
        return None
    nb, ob = new.blocks, old.blocks
    keep = min(keep, len(ob))
    changed = [i for i in sorted(patched) if i < keep and nb[i] is not ob[i]]
    changed += [i for i in range(keep, len(nb)) if i >= len(ob) or nb[i] is not ob[i]]
    close = [i for i in changed if i < len(ob)] + list(range(max(len(nb), keep), len(ob)))
    return _Plan(close, [(i, nb[i]) for i in changed])


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
                    if statement == STORE_BLOCKS_ONCE:
                        self._store_blocks_once(conn)
                    elif statement == SUMMARIZE_SESSIONS:
                        self._summarize_sessions(conn)
                    else:
                        self._exec(conn, statement)
                self._exec(conn, "INSERT INTO geppetto_schema (version) VALUES (?)", (number,))

    def _store_blocks_once(self, conn: Any) -> None:
        """Migration 4's data step: every snapshot's blocks (its document) become block versions, each
        stored once per session, and spans of the snapshots that hold them; the documents keep the Turn's
        own fields. Blocks are kept as the JSON they were written as, kinds this version does not know
        included."""
        sessions = self._rows(
            conn,
            "SELECT s.id, s.created_seq FROM sessions s WHERE EXISTS (SELECT 1 FROM snapshots WHERE session_id = s.id)",
        )
        inference_key, response_key = str(BLOCK_META_INFERENCE_ID), str(BLOCK_META_RESPONSE_ID)
        for session_id, sk in sessions:
            versions: dict[str, int] = {}
            held: dict[int, int] = {}  # position -> version the open span holds
            first: str | None = None
            snapshots = self._rows(
                conn, "SELECT seq, document FROM snapshots WHERE session_id = ? ORDER BY seq", (session_id,)
            )
            for seq, document in snapshots:
                doc = json.loads(document)
                raws = doc.get("blocks") or []
                close, spans, new = [], [], []
                for position, raw in enumerate(raws):
                    text = json.dumps(raw, ensure_ascii=False)
                    vid = versions.get(text)
                    if vid is None:
                        vid = versions[text] = len(versions) + 1
                        meta = raw.get("metadata") or {}
                        ids = [meta.get(k) for k in (inference_key, response_key)]
                        new.append((sk, vid, *(_column_id(v) for v in ids), text))
                    if held.get(position) == vid:
                        continue
                    if position in held:
                        close.append((seq - 1, sk, position))
                    held[position] = vid
                    spans.append((sk, position, seq, vid))
                for position in [p for p in held if p >= len(raws)]:
                    close.append((seq - 1, sk, position))
                    del held[position]
                if first is None:
                    users = (r for r in raws if isinstance(r, dict) and r.get("kind") == "user")
                    first = str(((next(users, None) or {}).get("payload") or {}).get("text") or "")
                    first = first.replace("\x00", "\ufffd")
                if close:
                    self._exec_many(
                        conn, "UPDATE spans SET to_seq = ? WHERE sk = ? AND position = ? AND to_seq IS NULL", close
                    )
                if new:
                    self._exec_many(conn, "INSERT INTO block_versions VALUES (?, ?, ?, ?, ?)", new)
                if spans:
                    self._exec_many(conn, "INSERT INTO spans (sk, position, from_seq, vid) VALUES (?, ?, ?, ?)", spans)
                doc["blocks"] = []
                self._exec(
                    conn,
                    "UPDATE snapshots SET document = ?, length = ? WHERE session_id = ? AND seq = ?",
                    (json.dumps(doc, ensure_ascii=False), len(raws), session_id, seq),
                )
            self._exec(conn, "UPDATE sessions SET first_prompt = ? WHERE id = ?", (first or "", session_id))

    def _summarize_sessions(self, conn: Any) -> None:
        """Migration 5's data step: the summary of every session with an event log, from all of its
        snapshots and events (as the dashboard computed it before the summaries were kept)."""
        from ...web._report import session_totals

        for (session_id,) in self._rows(conn, "SELECT DISTINCT session_id FROM events"):
            events = self._events(conn, session_id)
            totals = session_totals(self._load_range(conn, session_id), events)["totals"]
            self._exec(
                conn,
                "INSERT INTO session_summaries (session_id, events, totals) VALUES (?, ?, ?)",
                (session_id, len(events), json.dumps(totals)),
            )

    def _summarize(self, conn: Any, session_id: str, blocks: Frozen | None, rows: list[tuple[Any, ...]]) -> None:
        """Add one inference's events (``rows`` of the events table) to the session's summary, in the
        transaction that saves them; ``blocks``: the snapshot the inference saved (None: none)."""
        from ...web._report import add_totals, inference_totals

        wanted = [RecordedEvent(r[1], r[2], r[3], r[4], json.loads(r[5])) for r in rows if r[4] in ("final", "error")]
        totals = inference_totals(blocks, wanted)
        held = self._rows(conn, "SELECT events, totals FROM session_summaries WHERE session_id = ?", (session_id,))
        if held:
            self._exec(
                conn,
                "UPDATE session_summaries SET events = ?, totals = ? WHERE session_id = ?",
                (int(held[0][0]) + len(rows), json.dumps(add_totals(_payload(held[0][1]), totals)), session_id),
            )
        else:
            self._exec(
                conn,
                "INSERT INTO session_summaries (session_id, events, totals) VALUES (?, ?, ?)",
                (session_id, len(rows), json.dumps(totals)),
            )

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

    def _open_spans(self, conn: Any, sk: int) -> dict[int, tuple[int, str]]:
        rows = self._rows(
            conn,
            _SPANS + "WHERE p.sk = ? AND p.to_seq IS NULL",
            (sk,),
        )
        return {int(pos): (int(vid), block) for pos, vid, block in rows}

    def _plan_by_content(self, conn: Any, sk: int, frozen: Frozen) -> _Plan:
        """The spans that differ from the stored latest snapshot, comparing every block's JSON text."""
        stored = self._open_spans(conn, sk)
        blocks = frozen.blocks
        close, open_ = [], []
        for i, block in enumerate(blocks):
            held = stored.get(i)
            if held is not None and (self._vid(block, sk) == held[0] or block_to_json(block) == held[1]):
                block.__dict__["stored"] = (self._marker, sk, held[0])
                continue
            if held is not None:
                close.append(i)
            open_.append((i, block))
        close += [i for i in stored if i >= len(blocks)]
        return _Plan(close, open_)

    def _save(
        self,
        conn: Any,
        session_id: str,
        ids: tuple[str, str | None],
        frozen: Frozen,
        document: str,
        events: list[tuple[Any, ...]] | None,
    ) -> _Tip:
        with self._transaction(conn):
            self._ensure_session(conn, session_id)
            seq = self._rows(
                conn, "SELECT coalesce(max(seq), 0) + 1 FROM snapshots WHERE session_id = ?", (session_id,)
            )
            number = int(seq[0][0])
            tip = self._tips.get(session_id)
            plan = _diff(frozen, tip.frozen) if tip is not None and tip.seq == number - 1 else None
            sk = tip.sk if tip is not None else self._sk(conn, session_id)
            if plan is None:
                plan = self._plan_by_content(conn, sk, frozen)
            self._exec(
                conn,
                "INSERT INTO snapshots (session_id, seq, turn_id, document, inference_id, saved_at, length) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    number,
                    ids[0],
                    document,
                    ids[1],
                    time.time(),
                    len(frozen.blocks),
                ),
            )
            if plan.close:
                self._exec_many(
                    conn,
                    "UPDATE spans SET to_seq = ? WHERE sk = ? AND position = ? AND to_seq IS NULL",
                    [(number - 1, sk, i) for i in plan.close],
                )
            new_versions: list[tuple[Any, ...]] = []
            spans: list[tuple[Any, ...]] = []
            pending: dict[int, tuple[FrozenBlock, int]] = {}
            next_vid: int | None = None
            for position, block in plan.open:
                vid = self._vid(block, sk)
                if vid is None and id(block) in pending:
                    vid = pending[id(block)][1]
                if vid is None:
                    if next_vid is None:
                        rows = self._rows(conn, "SELECT coalesce(max(vid), 0) FROM block_versions WHERE sk = ?", (sk,))
                        next_vid = int(rows[0][0])
                    next_vid += 1
                    vid = next_vid
                    pending[id(block)] = (block, vid)
                    new_versions.append(_version_row(sk, vid, block))
                spans.append((sk, position, number, vid))
            if new_versions:
                self._exec_many(conn, "INSERT INTO block_versions VALUES (?, ?, ?, ?, ?)", new_versions)
            if spans:
                self._exec_many(conn, "INSERT INTO spans (sk, position, from_seq, vid) VALUES (?, ?, ?, ?)", spans)
            if number == 1:
                self._exec(
                    conn,
                    "UPDATE sessions SET first_prompt = ? WHERE id = ?",
                    (_first_prompt(frozen.blocks), session_id),
                )
            if events:
                self._insert_events(conn, events)
                self._summarize(conn, session_id, frozen, events)
        # Only once the transaction committed do the blocks count as stored.
        for block, vid in pending.values():
            block.__dict__["stored"] = (self._marker, sk, vid)
        return _Tip(sk, number, frozen)

    def _insert_events(self, conn: Any, events: list[tuple[Any, ...]]) -> None:
        statement = "INSERT INTO events (session_id, inference_id, seq, at, type, event) VALUES (?, ?, ?, ?, ?, ?)"
        self._exec_many(conn, statement, events)

    def _save_events(self, conn: Any, session_id: str, events: list[tuple[Any, ...]]) -> None:
        with self._transaction(conn):
            self._ensure_session(conn, session_id)
            self._insert_events(conn, events)
            self._summarize(conn, session_id, None, events)

    # -- the TurnStore interface ----------------------------------------------------------------
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
        self._remember(session_id, await self._run(self._save, session_id, ids, frozen, document, rows))

    def _remember(self, session_id: str, tip: _Tip) -> None:
        tips = self._tips
        tips.pop(session_id, None)
        tips[session_id] = tip
        if len(tips) > _TIPS:
            del tips[next(iter(tips))]

    async def save_events(self, session_id: str, inference_id: str, events: Sequence[TimedEvent]) -> None:
        """Record the event log of an inference that produced no snapshot (it failed or was cancelled)."""
        if events:
            await self._run(self._save_events, session_id, _event_rows(session_id, inference_id, events))

    async def load_session(self, session_id: str) -> list[Turn]:
        """The snapshots of ``session_id``, oldest first (empty when unknown). A block kind this version does
        not know (written by a newer geppetto) reads back as ``other`` with its kind kept in the payload.
        Snapshots share the versions of their unchanged blocks (copied when read)."""
        return await self._run(self._load_range, session_id)

    async def load_latest(self, session_id: str) -> Turn | None:
        """The latest snapshot of ``session_id`` (None when it has none): one snapshot read, whatever the
        length of the history."""
        return await self._run(self._load_one, session_id, None)

    async def load_snapshot(self, session_id: str, seq: int) -> Turn | None:
        """Snapshot number ``seq`` (1 is the first) of ``session_id``, None when there is no such one."""
        return await self._run(self._load_one, session_id, seq)

    async def load_snapshots(self, session_id: str, first: int, last: int) -> list[Turn]:
        """Snapshots ``first`` to ``last`` (both included) of ``session_id``, oldest first: a window of the
        history, read in one pass over the blocks those snapshots hold."""
        return await self._run(self._load_range, session_id, first, last)

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

    def _source(self, session_id: str) -> str:
        return f"{self.location} session {session_id}"

    def _frozen_all(self, sk: int, rows: list[tuple[int, str]], source: str) -> list[FrozenBlock]:
        """Frozen blocks from stored versions (``(vid, text)`` rows), each knowing where it is stored."""
        out = []
        for (vid, _text), block in zip(rows, blocks_from_json([t for _v, t in rows], source=source), strict=True):
            frozen = frozen_from(block)
            frozen.__dict__["stored"] = (self._marker, sk, vid)
            out.append(frozen)
        return out

    def _turn(self, document: str, frozen: Frozen, source: str) -> Turn:
        turn = turn_from_json(document, source=source, strict=False)
        turn.blocks = frozen.lazy()
        return turn

    def _load_one(self, conn: Any, session_id: str, seq: int | None) -> Turn | None:
        where = "" if seq is None else " AND n.seq = ?"
        params: tuple[Any, ...] = (session_id,) if seq is None else (session_id, seq)
        head = self._rows(
            conn,
            "SELECT n.seq, n.document, n.length, s.created_seq FROM snapshots n JOIN sessions s ON s.id = n.session_id "
            f"WHERE n.session_id = ?{where} ORDER BY n.seq DESC LIMIT 1",
            params,
        )
        if not head:
            return None
        number, document, length, sk = int(head[0][0]), head[0][1], head[0][2], int(head[0][3])
        source = self._source(session_id)
        tip = self._tips.get(session_id) if seq is None else None
        if tip is not None and tip.sk == sk and tip.seq <= number and length is not None:
            # This process knows an earlier latest: read only the spans opened since (what another
            # process wrote), and keep the versions it holds (and what it remembers of them).
            fresh = self._rows(
                conn,
                _SPANS + "WHERE p.sk = ? AND p.to_seq IS NULL AND p.from_seq > ? ORDER BY p.position",
                (sk, tip.seq),
            )
            blocks: list[FrozenBlock | None] = [*tip.frozen.blocks[:length]]
            blocks.extend([None] * (length - len(blocks)))
            read = self._frozen_all(sk, [(int(vid), text) for _pos, vid, text in fresh], source)
            for (position, _vid, _text), block in zip(fresh, read, strict=True):
                if int(position) < length:
                    blocks[int(position)] = block
            if all(b is not None for b in blocks):
                frozen = Frozen([b for b in blocks if b is not None])
                self._remember(session_id, _Tip(sk, number, frozen))
                return self._turn(document, frozen, source)
        if seq is None:
            spans = self._rows(
                conn,
                _SPANS + "WHERE p.sk = ? AND p.to_seq IS NULL ORDER BY p.position",
                (sk,),
            )
        else:
            spans = self._rows(
                conn,
                _SPANS
                + "WHERE p.sk = ? AND p.from_seq <= ? AND (p.to_seq IS NULL OR p.to_seq >= ?) ORDER BY p.position",
                (sk, number, number),
            )
        if [int(r[0]) for r in spans] != list(range(length if length is not None else len(spans))):
            raise StoreError(
                f"session store {self.location}: snapshot {number} of session {session_id!r} is missing blocks "
                "(its spans do not cover its positions); the store was changed outside geppetto"
            )
        frozen = Frozen(self._frozen_all(sk, [(int(vid), text) for _pos, vid, text in spans], source))
        if seq is None:
            self._remember(session_id, _Tip(sk, number, frozen))
        return self._turn(document, frozen, source)

    def _load_range(self, conn: Any, session_id: str, first: int | None = None, last: int | None = None) -> list[Turn]:
        """Snapshots ``first`` to ``last`` of ``session_id`` (None: from the first, to the latest), reading
        only the spans and block versions they hold."""
        where = ""
        params: list[Any] = [session_id]
        if first is not None:
            where += " AND seq >= ?"
            params.append(first)
        if last is not None:
            where += " AND seq <= ?"
            params.append(last)
        snaps = self._rows(
            conn, f"SELECT seq, document, length FROM snapshots WHERE session_id = ?{where} ORDER BY seq", params
        )
        if not snaps:
            return []
        sk = self._sk(conn, session_id)
        source = self._source(session_id)
        low, high = int(snaps[0][0]), int(snaps[-1][0])
        covering = "sk = ? AND from_seq <= ? AND (to_seq IS NULL OR to_seq >= ?)"
        rows = [
            (int(vid), text)
            for vid, text in self._rows(
                conn,
                f"SELECT vid, block FROM block_versions WHERE sk = ? AND vid IN (SELECT vid FROM spans WHERE {covering})",
                (sk, sk, high, low),
            )
        ]
        versions = dict(zip((vid for vid, _text in rows), self._frozen_all(sk, rows, source), strict=True))
        opens: dict[int, list[tuple[int, int]]] = {}
        for position, from_seq, vid in self._rows(
            conn, f"SELECT position, from_seq, vid FROM spans WHERE {covering}", (sk, high, low)
        ):
            # A span that began before the window holds its position from the window's first snapshot.
            opens.setdefault(max(int(from_seq), low), []).append((int(position), int(vid)))
        current: list[FrozenBlock] = []
        out: list[Turn] = []
        for number, document, length in snaps:
            for position, vid in opens.get(int(number), ()):
                if position >= len(current):
                    current.extend([versions[vid]] * (position + 1 - len(current)))
                current[position] = versions[vid]
            del current[length:]
            out.append(self._turn(document, Frozen(list(current)), source))
        return out

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
        return await self._run(self._events, session_id, inference_id, after, until)

    def _events(
        self,
        conn: Any,
        session_id: str,
        inference_id: str | None = None,
        after: float | None = None,
        until: float | None = None,
    ) -> list[RecordedEvent]:
        window, bounds = "", []
        if after is not None:
            window += " AND at > ?"
            bounds.append(after)
        if until is not None:
            window += " AND at <= ?"
            bounds.append(until)
        # Inferences in the order they began, each one's events in the order published.
        statement = f"""SELECT e.inference_id, e.seq, e.at, e.type, e.event FROM events e
            JOIN (SELECT inference_id, min(at) AS began FROM events WHERE session_id = ?{window} GROUP BY inference_id) f
              ON f.inference_id = e.inference_id
            WHERE e.session_id = ?{window.replace(" at ", " e.at ")}"""
        params: list[Any] = [session_id, *bounds, session_id, *bounds]
        if inference_id is not None:
            statement += " AND e.inference_id = ?"
            params.append(inference_id)
        rows = self._rows(conn, statement + " ORDER BY f.began, e.inference_id, e.seq", params)
        return [RecordedEvent(i, int(s), float(a), t, _payload(e)) for i, s, a, t, e in rows]

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
        statement = (
            "SELECT session_id, inference_id, status, worker, prompt, started_at, ended_at, error "
            "FROM inferences WHERE session_id = ?"
        )
        params: list[Any] = [session_id]
        if status is not None:
            statement += " AND status = ?"
            params.append(status)
        if after is not None:
            statement += " AND started_at > ?"
            params.append(after)
        if until is not None:
            statement += " AND started_at <= ?"
            params.append(until)
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


_SPANS = "SELECT p.position, p.vid, v.block FROM spans p JOIN block_versions v ON v.sk = p.sk AND v.vid = p.vid "
"""The spans of a session with the versions they hold; the caller adds the WHERE clause."""

_TIPS = 256
"""How many sessions' latest snapshots a store remembers (the most recently saved or read)."""


def _version_row(sk: int, vid: int, block: Block) -> tuple[Any, ...]:
    ids = (BLOCK_META_INFERENCE_ID.get(block.metadata), BLOCK_META_RESPONSE_ID.get(block.metadata))
    return (sk, vid, *(_column_id(v) for v in ids), block_to_json(block))


def _column_id(value: Any) -> str | None:
    """An id for the provenance columns: text PostgreSQL can hold (one with a NUL stays in the block's JSON
    only)."""
    return value if isinstance(value, str) and "\x00" not in value else None


def _first_prompt(blocks: Sequence[Block]) -> str:
    """The text of the first user block, for listings (a NUL, which PostgreSQL text cannot hold, shown as
    U+FFFD; the block itself keeps it, in its JSON)."""
    for block in blocks:
        if block.kind.value == "user":
            return block.text.replace("\x00", "\ufffd")
    return ""


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


def _usage_of(document: Any) -> dict[str, Any] | None:
    """The session usage totals a stored snapshot recorded (``geppetto.session_usage@v1``), if any."""
    usage = _payload(_payload(_payload(document).get("metadata")).get("geppetto.session_usage@v1"))
    return usage or None


def _payload(value: Any) -> dict[str, Any]:
    """A JSON column as a dict (PostgreSQL returns ``jsonb`` decoded, SQLite returns text; None: empty)."""
    data = json.loads(value) if isinstance(value, str | bytes) else value
    return data if isinstance(data, dict) else {}
