"""docs/provenance.md stays true: its SQL runs on a SQLite store and answers what it says, and its timeline
(a fresh Turn id per prompt, reused blocks keep their stamps) is what a Session writes."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import geppetto as gp
from geppetto.session.stores import open_store
from geppetto.testing import ScriptedEngine

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "provenance.md").read_text(encoding="utf-8")


async def test_the_pages_sql_answers_on_a_sqlite_store(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    store = open_store(path)
    session = gp.Session(ScriptedEngine([gp.Block.llm_text("A1"), gp.Block.llm_text("A2")]), store=store)
    out1 = await session.run("U1")
    out2 = await session.run("U2")
    store.close()
    i1, i2 = (str(o.metadata["geppetto.inference_id@v1"]) for o in (out1, out2))
    (sql,) = re.findall(r"```sql\n(.*?)```", PAGE, flags=re.DOTALL)
    latest, cycles = (q.strip() for q in sql.replace("SESSION-ID", session.session_id).split(";") if q.strip())
    with sqlite3.connect(path) as db:
        rows = db.execute(latest).fetchall()
        assert [r[1:4] for r in rows] == [
            ("user", out1.id, i1),
            ("llm_text", out1.id, i1),
            ("user", out2.id, i2),
            ("llm_text", out2.id, i2),
        ]
        assert db.execute(cycles).fetchall() == [(1, out1.id, i1), (2, out2.id, i2)]
    assert out1.id != out2.id  # a fresh Turn id per prompt
