"""Every store test runs on SQLite and on PostgreSQL (skipped, with the reason, when no server answers).

`store_target` is what `open_store()` takes: a file path, or a PostgreSQL URL whose search_path is a schema
made for the test and dropped after it. `GEPPETTO_TEST_POSTGRES_URL` names the server
(default: the local one, database `test`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

POSTGRES_URL = os.environ.get("GEPPETTO_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _admin() -> Any:
    import psycopg

    try:
        return psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        first = (str(exc).strip().splitlines() or ["?"])[0]
        pytest.skip(
            f"PostgreSQL is not reachable at {POSTGRES_URL} ({first}); start it or set GEPPETTO_TEST_POSTGRES_URL"
        )


@pytest.fixture
def postgres_target() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped after the test."""
    schema = f"geppetto_test_{uuid.uuid4().hex[:12]}"
    with _admin() as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"
    finally:
        with _admin() as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgres"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "sessions.db")
    return str(request.getfixturevalue("postgres_target"))
