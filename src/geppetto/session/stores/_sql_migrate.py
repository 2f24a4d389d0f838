"""The migrations runner of the SQL stores, with the data steps some migrations take."""

from __future__ import annotations

import json
from typing import Any

from ..._exceptions import StoreError
from ...turns import BLOCK_META_INFERENCE_ID, BLOCK_META_RESPONSE_ID
from .._requests import session_totals
from ._schema import MIGRATIONS, SCHEMA_VERSION, STORE_BLOCKS_ONCE, SUMMARIZE_SESSIONS
from ._sql_load import events_of, load_range
from ._sql_parts import Operations, _column_id

__all__ = ["migrate", "store_blocks_once", "summarize_sessions"]


def migrate(store: Operations, conn: Any) -> None:
    """Bring the database to this version's schema (each migration once, in one transaction)."""
    with store._transaction(conn):
        store.database.lock_migrations(conn)
        store._exec(conn, "CREATE TABLE IF NOT EXISTS geppetto_schema (version INTEGER NOT NULL)")
        current = store._rows(conn, "SELECT max(version) FROM geppetto_schema")[0][0] or 0
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"session store {store.location} has schema version {current}, newer than this geppetto knows "
                f"({SCHEMA_VERSION}); upgrade geppetto to open it"
            )
        for number in range(current + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[store.dialect.name][number - 1]:
                if statement == STORE_BLOCKS_ONCE:
                    store._store_blocks_once(conn)
                elif statement == SUMMARIZE_SESSIONS:
                    store._summarize_sessions(conn)
                else:
                    store._exec(conn, statement)
            store._exec(conn, "INSERT INTO geppetto_schema (version) VALUES (?)", (number,))


def store_blocks_once(store: Operations, conn: Any) -> None:
    """Migration 4's data step: every snapshot's blocks (its document) become block versions, each
    stored once per session, and spans of the snapshots that hold them; the documents keep the Turn's
    own fields. Blocks are kept as the JSON they were written as, kinds this version does not know
    included."""
    sessions = store._rows(
        conn,
        "SELECT s.id, s.created_seq FROM sessions s WHERE EXISTS (SELECT 1 FROM snapshots WHERE session_id = s.id)",
    )
    inference_key, response_key = str(BLOCK_META_INFERENCE_ID), str(BLOCK_META_RESPONSE_ID)
    for session_id, sk in sessions:
        versions: dict[str, int] = {}
        held: dict[int, int] = {}  # position -> version the open span holds
        first: str | None = None
        snapshots = store._rows(
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
                store._exec_many(
                    conn, "UPDATE spans SET to_seq = ? WHERE sk = ? AND position = ? AND to_seq IS NULL", close
                )
            if new:
                store._exec_many(conn, "INSERT INTO block_versions VALUES (?, ?, ?, ?, ?)", new)
            if spans:
                store._exec_many(conn, "INSERT INTO spans (sk, position, from_seq, vid) VALUES (?, ?, ?, ?)", spans)
            doc["blocks"] = []
            store._exec(
                conn,
                "UPDATE snapshots SET document = ?, length = ? WHERE session_id = ? AND seq = ?",
                (json.dumps(doc, ensure_ascii=False), len(raws), session_id, seq),
            )
        store._exec(conn, "UPDATE sessions SET first_prompt = ? WHERE id = ?", (first or "", session_id))


def summarize_sessions(store: Operations, conn: Any) -> None:
    """Migration 5's data step: the summary of every session with an event log, from all of its
    snapshots and events (as the dashboard computed it before the summaries were kept)."""
    for (session_id,) in store._rows(conn, "SELECT DISTINCT session_id FROM events"):
        events = events_of(store, conn, session_id)
        totals = session_totals(load_range(store, conn, session_id), events)["totals"]
        store._exec(
            conn,
            "INSERT INTO session_summaries (session_id, events, totals) VALUES (?, ?, ?)",
            (session_id, len(events), json.dumps(totals)),
        )
