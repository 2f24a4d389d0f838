"""Every store test runs on SQLite and on PostgreSQL (skipped, with the reason, when no server answers).

`store_target` is what `open_store()` takes: a file path, or a PostgreSQL URL whose search_path is a schema
made for the test and dropped after it. `GEPPETTO_TEST_POSTGRES_URL` names the server
(default: the local one, database `test`).
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "postgres"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "sessions.db")
    return str(request.getfixturevalue("postgres_target"))
