"""Numbered schema migrations for the SQL turn stores, applied in order on open.

Version N means the same tables and columns in every dialect; only the DDL spelling differs (PostgreSQL
stores JSON columns as ``jsonb`` and numbers sessions with an identity column). A step is a statement, or
the name of a data migration the store runs in Python at that point (:data:`STORE_BLOCKS_ONCE`,
:data:`SUMMARIZE_SESSIONS`).
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "STORE_BLOCKS_ONCE", "SUMMARIZE_SESSIONS"]

STORE_BLOCKS_ONCE = "-- geppetto: rewrite every snapshot as block versions and spans (see _sql.migrate_to_spans)"
"""Version 4's data step: each snapshot's blocks become versions stored once and spans of positions."""

SUMMARIZE_SESSIONS = "-- geppetto: sum up every session's requests from its events (see _sql.summarize_sessions)"
"""Version 5's data step: each session with an event log gets its summary row."""

# Version 5: per session, the request totals of the dashboard, kept at save time from each inference's
# events (``events``: how many events the session recorded; 0 means no event log, and the totals are
# then inferred from the latest snapshot when read). ``events_at`` finds the events of a window of time.
_V5 = [
    """CREATE TABLE session_summaries (
        session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
        events INTEGER NOT NULL,
        totals TEXT NOT NULL)""",
    "CREATE INDEX events_at ON events (session_id, at)",
    SUMMARIZE_SESSIONS,
]

# Version 6: the background responses a server's inferences are reading (``geppetto serve`` with a
# ``ResponsesEngine(background=True)``): the response id, the Turn the engine sent it for (its document) and the
# last ``sequence_number`` whose events were published, so another worker picks the inference up when the
# worker running it dies. A row lives while its inference runs.
_V6 = [
    """CREATE TABLE background_responses (
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        inference_id TEXT NOT NULL,
        response_id TEXT NOT NULL,
        sequence_number INTEGER NOT NULL,
        turn TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (session_id, inference_id))""",
]

# Version 7: a background request's ``resume_after``, what the provider needs to resume its events after
# the cursor when the number alone does not say it (the Interactions API's ``event_id``; NULL for a
# Responses API response, resumed after its ``sequence_number``).
_V7 = ["ALTER TABLE background_responses ADD COLUMN resume_after TEXT"]

# Version 8 (appended last): what each Responses endpoint (base URL and model) was found to do with
# server-side state (``verdict``: the JSON of ``geppetto.providers.openai_responses.Verdict``), and when
# it was learned, so a new process does not pay for the evidence again (docs/responses.md).
_V_ENDPOINT_VERDICTS = [
    """CREATE TABLE endpoint_verdicts (
        base_url TEXT NOT NULL,
        model TEXT NOT NULL,
        verdict TEXT NOT NULL,
        learned_at REAL NOT NULL,
        PRIMARY KEY (base_url, model))""",
]
_V_ENDPOINT_VERDICTS_PG = [_V_ENDPOINT_VERDICTS[0].replace("REAL", "DOUBLE PRECISION")]

# Version 4: a block is stored once per version (``block_versions``, its JSON text), and which snapshots
# hold it at which position is a span of snapshot numbers (``spans``: ``to_seq`` NULL while the latest
# holds it), so a save writes what changed. ``snapshots.document`` is the Turn without its blocks.
# ``blocks`` becomes a view with the columns it had, so provenance queries keep working.
_V4_COMMON = [
    "CREATE UNIQUE INDEX sessions_created_seq ON sessions (created_seq)",
    "ALTER TABLE sessions ADD COLUMN first_prompt TEXT",
    "ALTER TABLE snapshots ADD COLUMN length INTEGER",
]

# Each entry is one migration; its number is its index + 1. Never edit a released entry: append a new one.
SQLITE: list[list[str]] = [
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
    [
        "ALTER TABLE snapshots ADD COLUMN inference_id TEXT",
        "ALTER TABLE snapshots ADD COLUMN saved_at REAL",
        """CREATE TABLE events (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            inference_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            at REAL NOT NULL,
            type TEXT NOT NULL,
            event TEXT NOT NULL,
            PRIMARY KEY (session_id, inference_id, seq))""",
    ],
    [
        # Sessions made before their first snapshot (`geppetto serve`), with the settings they were made with,
        # and the inferences a server ran: status running/completed/failed/cancelled, for crash recovery.
        "ALTER TABLE sessions ADD COLUMN settings TEXT",
        "ALTER TABLE sessions ADD COLUMN created_at REAL",
        """CREATE TABLE inferences (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            inference_id TEXT NOT NULL,
            status TEXT NOT NULL,
            worker TEXT,
            prompt TEXT,
            started_at REAL NOT NULL,
            ended_at REAL,
            error TEXT,
            PRIMARY KEY (session_id, inference_id))""",
        "CREATE INDEX inferences_running ON inferences (session_id, status)",
    ],
    [
        *_V4_COMMON,
        """CREATE TABLE block_versions (
            sk INTEGER NOT NULL,
            vid INTEGER NOT NULL,
            inference_id TEXT,
            response_id TEXT,
            block TEXT NOT NULL,
            PRIMARY KEY (sk, vid)) WITHOUT ROWID""",
        """CREATE TABLE spans (
            sk INTEGER NOT NULL,
            position INTEGER NOT NULL,
            from_seq INTEGER NOT NULL,
            to_seq INTEGER,
            vid INTEGER NOT NULL,
            PRIMARY KEY (sk, position, from_seq)) WITHOUT ROWID""",
        "CREATE INDEX spans_open ON spans (sk, to_seq)",
        "CREATE INDEX block_versions_inference ON block_versions (inference_id)",
        STORE_BLOCKS_ONCE,
        "DROP TABLE blocks",
        """CREATE VIEW blocks AS
            SELECT s.id AS session_id, n.seq AS snapshot_seq, p.position AS position,
                   json_extract(v.block, '$.id') AS block_id, json_extract(v.block, '$.kind') AS kind,
                   json_extract(v.block, '$.role') AS role, json_extract(v.block, '$.turn_id') AS turn_id,
                   v.inference_id AS inference_id, v.response_id AS response_id,
                   json_extract(v.block, '$.payload') AS payload, json_extract(v.block, '$.metadata') AS metadata
            FROM spans p
            JOIN sessions s ON s.created_seq = p.sk
            JOIN snapshots n ON n.session_id = s.id AND n.seq >= p.from_seq AND (p.to_seq IS NULL OR n.seq <= p.to_seq)
            JOIN block_versions v ON v.sk = p.sk AND v.vid = p.vid""",
    ],
    _V5,
    _V6,
    _V7,
    _V_ENDPOINT_VERDICTS,
]

POSTGRES: list[list[str]] = [
    [
        # No IF NOT EXISTS: a database that already has a table of that name from elsewhere is refused.
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, created_seq BIGINT GENERATED BY DEFAULT AS IDENTITY)",
        """CREATE TABLE snapshots (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            turn_id TEXT NOT NULL,
            document TEXT NOT NULL,
            PRIMARY KEY (session_id, seq))""",
        """CREATE TABLE blocks (
            session_id TEXT NOT NULL,
            snapshot_seq INTEGER NOT NULL,
            position INTEGER NOT NULL,
            block_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            role TEXT NOT NULL,
            turn_id TEXT NOT NULL,
            inference_id TEXT,
            response_id TEXT,
            payload JSONB NOT NULL,
            metadata JSONB NOT NULL,
            PRIMARY KEY (session_id, snapshot_seq, position),
            FOREIGN KEY (session_id, snapshot_seq) REFERENCES snapshots(session_id, seq) ON DELETE CASCADE)""",
        "CREATE INDEX blocks_inference ON blocks (inference_id)",
        "CREATE INDEX blocks_response ON blocks (response_id)",
    ],
    [
        "ALTER TABLE snapshots ADD COLUMN inference_id TEXT",
        "ALTER TABLE snapshots ADD COLUMN saved_at DOUBLE PRECISION",
        """CREATE TABLE events (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            inference_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            type TEXT NOT NULL,
            event JSONB NOT NULL,
            PRIMARY KEY (session_id, inference_id, seq))""",
    ],
    [
        "ALTER TABLE sessions ADD COLUMN settings JSONB",
        "ALTER TABLE sessions ADD COLUMN created_at DOUBLE PRECISION",
        """CREATE TABLE inferences (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            inference_id TEXT NOT NULL,
            status TEXT NOT NULL,
            worker TEXT,
            prompt TEXT,
            started_at DOUBLE PRECISION NOT NULL,
            ended_at DOUBLE PRECISION,
            error TEXT,
            PRIMARY KEY (session_id, inference_id))""",
        "CREATE INDEX inferences_running ON inferences (session_id, status)",
    ],
    [
        *_V4_COMMON,
        """CREATE TABLE block_versions (
            sk BIGINT NOT NULL,
            vid INTEGER NOT NULL,
            inference_id TEXT,
            response_id TEXT,
            block TEXT NOT NULL,
            PRIMARY KEY (sk, vid))""",
        """CREATE TABLE spans (
            sk BIGINT NOT NULL,
            position INTEGER NOT NULL,
            from_seq INTEGER NOT NULL,
            to_seq INTEGER,
            vid INTEGER NOT NULL,
            PRIMARY KEY (sk, position, from_seq))""",
        "CREATE INDEX spans_open ON spans (sk, to_seq)",
        "CREATE INDEX block_versions_inference ON block_versions (inference_id)",
        STORE_BLOCKS_ONCE,
        "DROP TABLE blocks",
        """CREATE VIEW blocks AS
            SELECT s.id AS session_id, n.seq AS snapshot_seq, p.position AS position,
                   v.block::jsonb ->> 'id' AS block_id, v.block::jsonb ->> 'kind' AS kind,
                   v.block::jsonb ->> 'role' AS role, v.block::jsonb ->> 'turn_id' AS turn_id,
                   v.inference_id AS inference_id, v.response_id AS response_id,
                   v.block::jsonb -> 'payload' AS payload, v.block::jsonb -> 'metadata' AS metadata
            FROM spans p
            JOIN sessions s ON s.created_seq = p.sk
            JOIN snapshots n ON n.session_id = s.id AND n.seq >= p.from_seq AND (p.to_seq IS NULL OR n.seq <= p.to_seq)
            JOIN block_versions v ON v.sk = p.sk AND v.vid = p.vid""",
    ],
    _V5,
    _V6,
    _V7,
    _V_ENDPOINT_VERDICTS_PG,
]

MIGRATIONS: dict[str, list[list[str]]] = {"sqlite": SQLITE, "postgres": POSTGRES}
SCHEMA_VERSION = len(SQLITE)
assert len(POSTGRES) == SCHEMA_VERSION, "every dialect has every schema version"
