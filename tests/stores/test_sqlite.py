"""SQLiteTurnStore: exact round trips, listing, deletion, concurrency, and refusals that leave files untouched."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

import geppetto as gp
from geppetto.session import TurnStore
from geppetto.session.stores import SQLiteTurnStore, default_store_path, open_store
from geppetto.turns import BLOCK_META_INFERENCE_ID, BLOCK_META_RESPONSE_ID, TURN_META_MODEL, Block, Turn


def sample_turn(n: int = 0) -> Turn:
    turn = Turn()
    TURN_META_MODEL.set(turn.metadata, f"model-{n}")
    turn.data["app.x@v1"] = {"nested": [1, 2.5, None, True, "é"]}
    turn.append(Block.system("be brief"))
    turn.append(Block.user(f"question {n}"))
    answer = Block.llm_text("answer", item_id="msg_1")
    BLOCK_META_INFERENCE_ID.set(answer.metadata, f"inf-{n}")
    BLOCK_META_RESPONSE_ID.set(answer.metadata, f"resp-{n}")
    turn.append(answer)
    turn.append(Block.tool_call("call_1", "f", {"a": 1}))
    turn.append(Block.tool_use("call_1", {"ok": True}))
    return turn


async def test_round_trip_is_exact(tmp_path: Path) -> None:
    store = SQLiteTurnStore(tmp_path / "s.db")
    assert isinstance(store, TurnStore)
    first, second = sample_turn(1), sample_turn(2)
    await store.save_snapshot("s1", first)
    await store.save_snapshot("s1", second)
    store.close()
    assert await SQLiteTurnStore(tmp_path / "s.db").load_session("s1") == [first, second]


async def test_blocks_are_queryable_provenance(tmp_path: Path) -> None:
    store = SQLiteTurnStore(tmp_path / "s.db")
    turn = sample_turn(3)
    await store.save_snapshot("s1", turn)
    store.close()
    with sqlite3.connect(tmp_path / "s.db") as conn:
        rows = conn.execute("SELECT block_id, kind, role, inference_id, response_id FROM blocks ORDER BY position")
        assert rows.fetchall() == [
            (
                b.id,
                b.kind.value,
                b.role,
                BLOCK_META_INFERENCE_ID.get(b.metadata),
                BLOCK_META_RESPONSE_ID.get(b.metadata),
            )
            for b in turn.blocks
        ]


async def test_list_unknown_and_delete(tmp_path: Path) -> None:
    store = SQLiteTurnStore(tmp_path / "s.db")
    for sid in ("b", "a", "c"):
        await store.save_snapshot(sid, sample_turn())
    assert await store.list_sessions() == ["b", "a", "c"]
    assert await store.load_session("missing") == []
    await store.delete_session("a")
    assert await store.list_sessions() == ["b", "c"]
    assert await store.load_session("a") == []
    with pytest.raises(gp.StoreError, match="no session 'a'"):
        await store.delete_session("a")


async def test_concurrent_sessions(tmp_path: Path) -> None:
    stores = [SQLiteTurnStore(tmp_path / "s.db") for _ in range(4)]
    turns = {f"s{i}": [sample_turn(j) for j in range(5)] for i in range(8)}

    async def write(i: int, sid: str) -> None:
        for t in turns[sid]:
            await stores[i % 4].save_snapshot(sid, t)

    await asyncio.gather(*(write(i, sid) for i, sid in enumerate(turns)))
    reader = SQLiteTurnStore(tmp_path / "s.db")
    assert {sid: await reader.load_session(sid) for sid in turns} == turns


async def test_corrupt_file_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    garbage = b"this is not a database" * 100
    path.write_bytes(garbage)
    with pytest.raises(gp.StoreError, match=r"not a readable SQLite database.*move it aside"):
        await SQLiteTurnStore(path).save_snapshot("s", sample_turn())
    assert path.read_bytes() == garbage


async def test_newer_schema_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteTurnStore(path)
    await store.save_snapshot("s", sample_turn())
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO geppetto_schema (version) VALUES (99)")
    before = path.read_bytes()
    with pytest.raises(gp.StoreError, match=r"schema version 99.*upgrade geppetto"):
        await SQLiteTurnStore(path).load_session("s")
    assert path.read_bytes() == before


def test_default_path_and_open_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEPPETTO_DATA_DIR", str(tmp_path / "d"))
    assert default_store_path() == tmp_path / "d" / "sessions.db"
    monkeypatch.delenv("GEPPETTO_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "x"))
    assert default_store_path() == tmp_path / "x" / "geppetto" / "sessions.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert default_store_path() == tmp_path / "h" / ".local" / "share" / "geppetto" / "sessions.db"
    assert open_store(f"sqlite:///{tmp_path}/a.db").path == tmp_path / "a.db"
    assert open_store(tmp_path / "b.db").path == tmp_path / "b.db"
