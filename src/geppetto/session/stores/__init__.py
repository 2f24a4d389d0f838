"""Persistent turn stores: SQLite by default (a file in the user's data folder), PostgreSQL for scale.

``open_store()`` picks one from a path or URL; both keep the same schema (``docs/persistence.md``).

The names imported as ``name as name`` and left out of ``__all__`` are geppetto's own internal API: the record
of the background responses a server's inferences are reading, which the server keeps and reads back. Not part
of the public API; they may change in any release.
"""

from __future__ import annotations

import os

from .._store import RecordedEvent
from ._background import BackgroundRecord as BackgroundRecord
from ._background import background_response as background_response
from ._background import forget_background_response as forget_background_response
from ._background import save_background_cursor as save_background_cursor
from ._background import save_background_response as save_background_response
from ._background import set_events_aside as set_events_aside
from ._postgres import PostgresTurnStore, redact_url
from ._sql import InferenceRecord, SessionInfo, SessionLease, SessionSummary, SnapshotInfo, SQLTurnStore
from ._sqlite import SQLiteTurnStore, default_store_path

__all__ = [
    "InferenceRecord",
    "PostgresTurnStore",
    "RecordedEvent",
    "SQLTurnStore",
    "SQLiteTurnStore",
    "SessionInfo",
    "SessionLease",
    "SessionSummary",
    "SnapshotInfo",
    "default_store_path",
    "open_store",
    "redact_url",
]


def open_store(target: str | os.PathLike[str] | None = None, *, create: bool = True) -> SQLTurnStore:
    """A store for ``target``: ``postgresql://...`` (or ``postgres://``), ``sqlite:///path`` or a file path.

    None means ``$GEPPETTO_STORE`` when set, else the SQLite file at :func:`default_store_path`.
    Nothing is opened until the store is first used; ``create=False`` makes a missing SQLite file an error
    instead of a new store (for commands that only read).
    """
    if target is None:
        target = os.environ.get("GEPPETTO_STORE") or default_store_path()
    text = os.fspath(target)
    if text.startswith(("postgresql://", "postgres://")):
        return PostgresTurnStore(text)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    return SQLiteTurnStore(text, create=create)
