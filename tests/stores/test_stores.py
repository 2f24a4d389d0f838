"""The store suite, run on SQLite and on PostgreSQL: exact round trips, provenance rows, listing, deletion,
event logs, concurrent writers, and refusals that leave the data untouched."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from store_support import query

import geppetto as gp
from geppetto.events import EventFinal, EventMetadata, EventTextDelta, Usage
from geppetto.session import EventLogStore, MemoryTurnStore, RecordedEvent, Session, TurnStore
from geppetto.session.stores import (
    PostgresTurnStore,
    SessionInfo,
    SQLiteTurnStore,
    SQLTurnStore,
    default_store_path,
    open_store,
)
from geppetto.session.stores._schema import MIGRATIONS, SCHEMA_VERSION
from geppetto.testing import ScriptedEngine
from geppetto.turns import (
    BLOCK_META_INFERENCE_ID,
    BLOCK_META_RESPONSE_ID,
    TURN_META_INFERENCE_ID,
    TURN_META_MODEL,
    Block,
    Turn,
    dumps_json,
)


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


async def test_round_trip_is_exact(store_target: str) -> None:
    with open_store(store_target) as store:
        assert isinstance(store, TurnStore) and isinstance(store, EventLogStore)
        first, second = sample_turn(1), sample_turn(2)
        await store.save_snapshot("s1", first)
        await store.save_snapshot("s1", second)
    with open_store(store_target) as reopened:
        assert await reopened.load_session("s1") == [first, second]


async def test_blocks_are_queryable_provenance(store_target: str) -> None:
    turn = sample_turn(3)
    with open_store(store_target) as store:
        await store.save_snapshot("s1", turn)
    rows = query(
        store_target,
        "SELECT block_id, kind, role, turn_id, inference_id, response_id FROM blocks WHERE session_id = ? "
        "ORDER BY position",
        ("s1",),
    )
    assert rows == [
        (
            b.id,
            b.kind.value,
            b.role,
            b.turn_id,
            BLOCK_META_INFERENCE_ID.get(b.metadata),
            BLOCK_META_RESPONSE_ID.get(b.metadata),
        )
        for b in turn.blocks
    ]


async def test_list_unknown_and_delete(store_target: str) -> None:
    with open_store(store_target) as store:
        for sid in ("b", "a", "c"):
            await store.save_snapshot(sid, sample_turn())
        assert await store.list_sessions() == ["b", "a", "c"]
        assert await store.load_session("missing") == []
        await store.delete_session("a")
        assert await store.list_sessions() == ["b", "c"]
        assert await store.load_session("a") == []
        assert query(store_target, "SELECT count(*) FROM blocks WHERE session_id = ?", ("a",)) == [(0,)]
        with pytest.raises(gp.StoreError, match=r"no session 'a' in .*geppetto sessions list"):
            await store.delete_session("a")


async def test_summaries(store_target: str) -> None:
    with open_store(store_target) as store:
        one, two = sample_turn(1), sample_turn(2)
        two.append(Block.user("more"))
        TURN_META_INFERENCE_ID.set(two.metadata, "inf-2")
        await store.save_snapshot("s", one)
        await store.save_snapshot("s", two)
        [info] = await store.session_infos()
        assert (info.session_id, info.snapshots, info.blocks, info.first_prompt) == ("s", 2, 6, "question 1")
        assert info.updated_at is not None
        snaps = await store.snapshot_infos("s")
        assert [(s.seq, s.turn_id, s.inference_id, s.blocks) for s in snaps] == [
            (1, one.id, None, 5),
            (2, two.id, "inf-2", 6),
        ]
        assert await store.snapshot_infos("missing") == []
        assert SessionInfo("x", 1, None, 2, "hi").to_dict()["first_prompt"] == "hi"


def _events(text: str) -> list[tuple[float, gp.events.Event]]:
    meta = EventMetadata(inference_id="inf-9", usage=Usage(input_tokens=3, output_tokens=2))
    return [(100.0, EventTextDelta(meta, delta=text)), (100.5, EventFinal(meta, text=text))]


async def test_events_with_snapshot_and_alone(store_target: str) -> None:
    with open_store(store_target) as store:
        turn = sample_turn()
        TURN_META_INFERENCE_ID.set(turn.metadata, "inf-9")
        await store.save_snapshot("s", turn, events=_events("hi"))
        await store.save_events("s", "inf-failed", [(200.0, EventTextDelta(EventMetadata(), delta="x"))])
        events = await store.load_events("s")
        assert [(e.inference_id, e.seq, e.at, e.type) for e in events] == [
            ("inf-9", 0, 100.0, "text_delta"),
            ("inf-9", 1, 100.5, "final"),
            ("inf-failed", 0, 200.0, "text_delta"),
        ]
        assert events[1].event == {
            "type": "final",
            "text": "hi",
            "metadata": {
                "inference_id": "inf-9",
                "usage": {
                    "input_tokens": 3,
                    "output_tokens": 2,
                    "cached_tokens": 0,
                    "reasoning_tokens": 0,
                    "cache_write_tokens": 0,
                },
            },
        }
        assert [e.seq for e in await store.load_events("s", "inf-failed")] == [0]
        # A session whose only inference failed has an event log but no snapshot: not listed.
        await store.save_events("lost", "inf-x", _events("y"))
        assert await store.list_sessions() == ["s"]
        await store.delete_session("s")
        assert await store.load_events("s") == []


async def test_memory_store_keeps_the_same_event_log(store_target: str) -> None:
    memory = MemoryTurnStore()
    turn = sample_turn()
    TURN_META_INFERENCE_ID.set(turn.metadata, "inf-9")
    with open_store(store_target) as store:
        for s in (memory, store):
            await s.save_snapshot("s", turn, events=_events("hé"))
        assert await memory.load_events("s") == await store.load_events("s")
    assert isinstance((await memory.load_events("s", "inf-9"))[0], RecordedEvent)


async def test_session_records_events_of_completed_and_failed_inferences(store_target: str) -> None:
    class Boom(Exception):
        pass

    async def answer(turn: Turn) -> Turn:
        meta = gp.events.metadata_for(turn)
        gp.events.publish(EventTextDelta(meta, delta="Hello!"))
        gp.events.publish(EventFinal(meta, text="Hello!"))
        turn.append(Block.llm_text("Hello!"))
        return turn

    async def fail(turn: Turn) -> Turn:
        gp.events.publish(EventTextDelta(gp.events.metadata_for(turn), delta="partial"))
        raise Boom("provider went away")

    with open_store(store_target) as store:
        session = Session(gp.testing.FunctionEngine(answer), store=store, record_events=True)
        out = await session.run("Hi")
        inference = TURN_META_INFERENCE_ID.get(out.metadata)
        logged = await store.load_events(session.session_id)
        assert [(e.inference_id, e.type, e.event["metadata"]["session_id"]) for e in logged] == [
            (inference, "text_delta", session.session_id),
            (inference, "final", session.session_id),
        ]
        session.engine = gp.testing.FunctionEngine(fail)
        session.prompt("again")
        with pytest.raises(Boom):
            await session.start_inference().wait()
        failed = [e for e in await store.load_events(session.session_id) if e.inference_id != inference]
        assert [(e.type, e.event.get("delta")) for e in failed] == [("text_delta", "partial")]
        assert await store.load_session(session.session_id) == [out]  # no snapshot for the failure


def test_record_events_needs_an_event_log_store() -> None:
    class Plain:
        async def save_snapshot(self, session_id: str, turn: Turn) -> None: ...
        async def load_session(self, session_id: str) -> list[Turn]:
            return []

        async def list_sessions(self) -> list[str]:
            return []

    with pytest.raises(gp.UsageError, match=r"record_events=True needs a store that keeps event logs"):
        Session(ScriptedEngine([]), store=Plain(), record_events=True)


async def test_concurrent_sessions(store_target: str) -> None:
    stores = [open_store(store_target) for _ in range(4)]
    turns = {f"s{i}": [sample_turn(j) for j in range(5)] for i in range(8)}

    async def write(i: int, sid: str) -> None:
        for t in turns[sid]:
            await stores[i % 4].save_snapshot(sid, t)

    try:
        await asyncio.gather(*(write(i, sid) for i, sid in enumerate(turns)))
        # Two writers on one session at once still number its snapshots 1..N with none lost.
        shared = [sample_turn(100 + j) for j in range(10)]
        await asyncio.gather(*(stores[j % 2].save_snapshot("shared", t) for j, t in enumerate(shared)))
    finally:
        for s in stores:
            s.close()
    with open_store(store_target) as reader:
        assert {sid: await reader.load_session(sid) for sid in turns} == turns
        loaded = await reader.load_session("shared")
        assert sorted(t.id for t in loaded) == sorted(t.id for t in shared)
        assert [s.seq for s in await reader.snapshot_infos("shared")] == list(range(1, 11))


async def test_newer_schema_is_refused_and_untouched(store_target: str) -> None:
    with open_store(store_target) as store:
        await store.save_snapshot("s", sample_turn())
    query(store_target, "INSERT INTO geppetto_schema (version) VALUES (99)")
    before = query(store_target, "SELECT document FROM snapshots")
    with pytest.raises(gp.StoreError, match=r"schema version 99.*upgrade geppetto"), open_store(store_target) as s:
        await s.load_session("s")
    assert query(store_target, "SELECT document FROM snapshots") == before
    assert query(store_target, "SELECT max(version) FROM geppetto_schema") == [(99,)]


async def test_unknown_block_kinds_read_back_as_other(store_target: str) -> None:
    with open_store(store_target) as store:
        await store.save_snapshot("s", sample_turn())
    [block] = [b for (b,) in query(store_target, "SELECT block FROM block_versions") if '"kind": "user"' in b]
    query(
        store_target,
        "UPDATE block_versions SET block = ? WHERE block = ?",
        (block.replace('"user"', '"video"', 1), block),
    )
    with open_store(store_target) as store:
        [turn] = await store.load_session("s")
    assert turn.blocks[1].kind is gp.BlockKind.OTHER and turn.blocks[1].payload["original_kind"] == "video"


async def test_restore_of_unknown_session_names_the_fix(store_target: str) -> None:
    with (
        open_store(store_target) as store,
        pytest.raises(gp.UsageError, match=r"no snapshots for session 'nope'.*list_sessions"),
    ):
        await Session.restore(ScriptedEngine([]), store, "nope")


# -- SQLite only ---------------------------------------------------------------------------------


async def test_corrupt_file_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    garbage = b"this is not a database" * 100
    path.write_bytes(garbage)
    with pytest.raises(gp.StoreError, match=r"not a readable SQLite database.*move it aside"):
        await SQLiteTurnStore(path).save_snapshot("s", sample_turn())
    assert path.read_bytes() == garbage


async def test_version_1_file_is_migrated_in_place(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    turn = sample_turn(7)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE geppetto_schema (version INTEGER NOT NULL)")
        for statement in MIGRATIONS["sqlite"][0]:
            conn.execute(statement)
        conn.execute("INSERT INTO geppetto_schema VALUES (1)")
        conn.execute("INSERT INTO sessions VALUES ('old', 1)")
        conn.execute("INSERT INTO snapshots VALUES ('old', 1, ?, ?)", (turn.id, dumps_json(turn)))
    with SQLiteTurnStore(path) as store:
        assert await store.load_session("old") == [turn]
        await store.save_snapshot("old", sample_turn(8), events=_events("z"))
        assert len(await store.load_session("old")) == 2
        assert [e.type for e in await store.load_events("old")] == ["text_delta", "final"]
    assert query(str(path), "SELECT version FROM geppetto_schema ORDER BY version") == [
        (n,) for n in range(1, SCHEMA_VERSION + 1)
    ]


def test_default_path_and_open_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEPPETTO_STORE", raising=False)
    monkeypatch.setenv("GEPPETTO_DATA_DIR", str(tmp_path / "d"))
    assert default_store_path() == tmp_path / "d" / "sessions.db"
    opened = open_store()
    assert isinstance(opened, SQLiteTurnStore) and opened.path == tmp_path / "d" / "sessions.db"
    monkeypatch.delenv("GEPPETTO_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "x"))
    assert default_store_path() == tmp_path / "x" / "geppetto" / "sessions.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert default_store_path() == tmp_path / "h" / ".local" / "share" / "geppetto" / "sessions.db"
    sqlite_store = open_store(f"sqlite:///{tmp_path}/a.db")
    assert isinstance(sqlite_store, SQLiteTurnStore) and sqlite_store.path == tmp_path / "a.db"
    file_store = open_store(tmp_path / "b.db")
    assert isinstance(file_store, SQLiteTurnStore) and file_store.path == tmp_path / "b.db"
    monkeypatch.setenv("GEPPETTO_STORE", "postgresql://u:secret@db.example/geppetto")
    pg = open_store()
    assert isinstance(pg, PostgresTurnStore) and isinstance(pg, SQLTurnStore)
    assert pg.location == "postgresql://u:***@db.example/geppetto"
    assert not (tmp_path / "a.db").exists()  # nothing is opened before first use


# -- PostgreSQL only -----------------------------------------------------------------------------


async def test_unreachable_postgres_names_the_fix() -> None:
    store = PostgresTurnStore("postgresql://geppetto:hunter2@127.0.0.1:9/nowhere", connect_timeout=2)
    with pytest.raises(gp.StoreError) as info:
        await store.load_session("s")
    message = str(info.value)
    assert "cannot reach the PostgreSQL session store postgresql://geppetto:***@127.0.0.1:9/nowhere" in message
    assert "start the server or fix the URL" in message and "hunter2" not in message


async def test_postgres_refuses_a_database_with_foreign_tables(postgres_target: str) -> None:
    store_target = postgres_target
    query(store_target, "CREATE TABLE sessions (name TEXT)")
    with (
        pytest.raises(gp.StoreError, match=r"already has a table geppetto did not create.*another database or schema"),
        open_store(store_target) as store,
    ):
        await store.list_sessions()
    assert query(store_target, "SELECT count(*) FROM information_schema.columns WHERE column_name = 'name'") != []
    assert json.loads(json.dumps(query(store_target, "SELECT * FROM sessions"))) == []
