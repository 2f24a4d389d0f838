"""Persistent turn stores: SQLite by default (a file in the user's data folder)."""

from ._sqlite import SQLiteTurnStore, default_store_path, open_store

__all__ = ["SQLiteTurnStore", "default_store_path", "open_store"]
