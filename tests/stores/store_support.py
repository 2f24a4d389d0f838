"""Direct SQL against a store's database, for the store tests."""

from __future__ import annotations

from typing import Any


def query(target: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one SQL statement against the store's database directly (`?` placeholders)."""
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            cur = conn.execute(sql.replace("?", "%s"), params)
            return list(cur.fetchall()) if cur.description else []
    import sqlite3

    with sqlite3.connect(target) as conn:
        return list(conn.execute(sql, params).fetchall())
