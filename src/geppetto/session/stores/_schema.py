"""Numbered schema migrations for the SQL turn stores, applied in order on open."""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION"]

# Each entry is one migration; its number is its index + 1. Never edit a released entry: append a new one.
MIGRATIONS: list[list[str]] = [
    [
        "CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, created_seq INTEGER NOT NULL)",
        """CREATE TABLE IF NOT EXISTS snapshots (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            turn_id TEXT NOT NULL,
            document TEXT NOT NULL,
            PRIMARY KEY (session_id, seq))""",
        """CREATE TABLE IF NOT EXISTS blocks (
            session_id TEXT NOT NULL,
            snapshot_seq INTEGER NOT NULL,
            position INTEGER NOT NULL,
            block_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            role TEXT NOT NULL,
            turn_id TEXT NOT NULL,
            inference_id TEXT,
            response_id TEXT,
            payload TEXT NOT NULL,
            metadata TEXT NOT NULL,
            PRIMARY KEY (session_id, snapshot_seq, position),
            FOREIGN KEY (session_id, snapshot_seq) REFERENCES snapshots(session_id, seq) ON DELETE CASCADE)""",
        "CREATE INDEX IF NOT EXISTS blocks_inference ON blocks (inference_id)",
        "CREATE INDEX IF NOT EXISTS blocks_response ON blocks (response_id)",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)
