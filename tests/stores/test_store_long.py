"""Blocks stored once (schema 4): every historical snapshot loads exactly as it was saved after random edits,
inserts, removals and reorders between saves; a save writes only what changed; a store written by the schema-3
code migrates in one transaction and loses nothing; the provenance queries of docs/persistence.md still work."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_support import query

import geppetto as gp
from geppetto.session import MemoryTurnStore, Session
from geppetto.session.stores import SQLiteTurnStore, open_store
from geppetto.session.stores._schema import SCHEMA_VERSION
from geppetto.testing import ScriptedEngine
from geppetto.turns import BLOCK_META_RESPONSE_ID, Block, Turn, turn_to_dict

FIXTURES = Path(__file__).parent / "fixtures"

# One edit of a Turn between two saves: what a middleware or a user may do to a conversation.
EDITS = st.lists(
    st.tuples(
        st.sampled_from(["append", "edit", "edit_nested", "insert", "remove", "reverse", "swap", "replace", "meta"]),
        st.integers(0, 1000),
        st.text(max_size=8),
    ),
    max_size=6,
)


def _edit(turn: Turn, op: str, n: int, text: str) -> None:
    blocks = turn.blocks
    i = n % len(blocks) if blocks else 0
    if op == "append" or not blocks:
        turn.append(Block.user(text, [{"url": f"u{n}"}]) if n % 3 == 0 else Block.llm_text(text))
    elif op == "edit":
        blocks[i].payload["text"] = text
    elif op == "edit_nested":
        blocks[i].payload.setdefault("images", [{"url": "x"}])
        if isinstance(blocks[i].payload["images"], list) and blocks[i].payload["images"]:
            blocks[i].payload["images"][0]["url"] = text
    elif op == "insert":
        turn.insert(i, Block.system(text))
    elif op == "remove":
        del blocks[i]
    elif op == "reverse":
        blocks.reverse()
    elif op == "swap":
        j = (n // 7) % len(blocks)
        blocks[i], blocks[j] = blocks[j], blocks[i]
    elif op == "replace":
        blocks[i] = Block.llm_text(text)
    elif op == "meta":
        BLOCK_META_RESPONSE_ID.set(blocks[i].metadata, f"resp_{text}")
        turn.data["app.n@v1"] = n


async def _check_history(store: Any, session_id: str, saved: list[dict[str, Any]]) -> None:
    loaded = await store.load_session(session_id)
    assert [turn_to_dict(t) for t in loaded] == saved
    for seq, expected in enumerate(saved, 1):
        one = await store.load_snapshot(session_id, seq)
        assert one is not None and turn_to_dict(one) == expected
    latest = await store.load_latest(session_id)
    assert latest is not None and turn_to_dict(latest) == saved[-1]
    if hasattr(store, "load_snapshots"):  # windows of three, each read in one pass
        for first in range(1, len(saved) + 1):
            last = min(len(saved), first + 2)
            window = await store.load_snapshots(session_id, first, last)
            assert [turn_to_dict(t) for t in window] == saved[first - 1 : last]


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(EDITS, min_size=1, max_size=6), between=st.lists(EDITS, min_size=6, max_size=6))
async def test_every_snapshot_loads_exactly_as_saved_after_random_edits(
    script: list[list[tuple[str, int, str]]], between: list[list[tuple[str, int, str]]], store_target: str
) -> None:
    """Edits made inside inferences (a middleware) and by the user on session.latest between prompts."""
    answers = [Block.llm_text(f"answer {i}") for i in range(len(script))]
    engine = ScriptedEngine(answers)
    edits = list(script)
    session_id = f"prop-{abs(hash((str(script), str(between)))) % 10**9}"
    with open_store(store_target) as store, open_store(store_target) as other:
        session = Session(engine, middlewares=[_editor(edits)], store=store, session_id=session_id)
        saved: list[dict[str, Any]] = []
        edited = []
        for i in range(len(script)):
            out = await session.run(f"prompt {i}")
            saved.append(turn_to_dict(out))
            for op in between[i]:  # the user edits the latest snapshot before the next prompt
                _edit(out, *op)
            edited.append(turn_to_dict(out))
        # The history holds each output as it was when the next prompt began (the user's edits included),
        # and each seed as it was sent; copies read from it are isolated from each other.
        assert [turn_to_dict(t) for t in session.history[1::2]] == edited
        copy = session.history[0]
        _edit(copy, "edit", 0, "changed only in this copy")
        assert session.history[0] != copy
        await _check_history(store, session_id, saved)
        await _check_history(other, session_id, saved)  # another process's view: nothing cached


def _editor(script: list[list[tuple[str, int, str]]]) -> Any:
    """A middleware that applies the next scripted list of edits before each inference."""

    def middleware(next_handler: Any) -> Any:
        async def handler(turn: Turn) -> Turn:
            for op in script.pop(0) if script else []:
                _edit(turn, *op)
            return await next_handler(turn)  # type: ignore[no-any-return]

        return handler

    return middleware


async def test_plain_turns_saved_from_anywhere_round_trip(store_target: str) -> None:
    """Turns that no session made (a caller's own objects), edited in place between saves."""
    turn = Turn()
    turn.append(Block.system("s"))
    turn.append(Block.user("u"))
    saved = []
    with open_store(store_target) as store:
        for i in range(6):
            _edit(turn, ["append", "edit", "insert", "remove", "reverse", "meta"][i], i * 5, f"t{i}")
            await store.save_snapshot("plain", turn)
            saved.append(turn_to_dict(turn))
        await _check_history(store, "plain", saved)


async def test_a_save_writes_only_what_changed(store_target: str) -> None:
    session = Session(ScriptedEngine([Block.llm_text(f"a{i}") for i in range(30)]), store=open_store(store_target))
    for i in range(30):
        await session.run(f"q{i}")
    # Two blocks a prompt (the question and the answer): each stored once, in one span each.
    assert query(store_target, "SELECT count(*) FROM block_versions") == [(60,)]
    assert query(store_target, "SELECT count(*) FROM spans") == [(60,)]
    assert query(store_target, "SELECT count(*) FROM snapshots") == [(30,)]
    latest = await Session.restore(ScriptedEngine([Block.llm_text("z")]), open_store(store_target), session.session_id)
    assert [b.text for b in latest.latest.blocks] == [t for i in range(30) for t in (f"q{i}", f"a{i}")]  # type: ignore[union-attr]


async def test_provenance_queries_of_the_docs_still_work(store_target: str) -> None:
    session = Session(ScriptedEngine([Block.llm_text("a1"), Block.llm_text("a2")]), store=open_store(store_target))
    await session.run("q1")
    out = await session.run("q2")
    sid = session.session_id
    rows = query(
        store_target,
        "SELECT position, kind, role, block_id, inference_id FROM blocks WHERE session_id = ? "
        "AND snapshot_seq = (SELECT max(seq) FROM snapshots WHERE session_id = ?) ORDER BY position",
        (sid, sid),
    )
    assert [(r[0], r[1], r[3]) for r in rows] == [(i, b.kind.value, b.id) for i, b in enumerate(out.blocks)]
    assert query(store_target, "SELECT count(*) FROM blocks WHERE session_id = ?", (sid,)) == [(6,)]  # 2 + 4
    text = "payload->>'text'" if store_target.startswith("postgresql") else "json_extract(payload, '$.text')"
    inference = rows[-1][4]
    found = query(store_target, f"SELECT DISTINCT {text} FROM blocks WHERE inference_id = ?", (inference,))
    assert sorted(r[0] for r in found) == ["a2", "q2"]


def _migrated(tmp_path: Path) -> Path:
    path = tmp_path / "store.db"
    shutil.copy(FIXTURES / "store_v3.db", path)
    return path


async def test_a_schema_3_store_migrates_and_loses_nothing(tmp_path: Path) -> None:
    path = _migrated(tmp_path)
    expected = json.loads((FIXTURES / "store_v3.expected.json").read_text())
    with SQLiteTurnStore(path) as store:
        assert await store.list_sessions() == list(expected["snapshots"])
        for sid, snapshots in expected["snapshots"].items():
            await _check_history(store, sid, snapshots)
            events = [[e.inference_id, e.seq, e.at, e.type, e.event] for e in await store.load_events(sid)]
            assert events == expected["events"][sid]
        assert [i.to_dict() for i in await store.session_infos(include_empty=True)] == expected["infos"]
        # The migrated session goes on: a restore reads its latest snapshot, a save adds only the new blocks.
        session = await Session.restore(ScriptedEngine([Block.llm_text("more")]), store, "chat-1")
        out = await session.run("go on")
        assert [b.text for b in out.blocks][-2:] == ["go on", "more"]
    assert query(str(path), "SELECT max(version) FROM geppetto_schema") == [(SCHEMA_VERSION,)]
    assert query(str(path), "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'blocks'") == [(0,)]


async def test_a_failed_migration_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _migrated(tmp_path)
    before = path.read_bytes()

    def broken(self: Any, conn: Any) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(SQLiteTurnStore, "_store_blocks_once", broken)
    with pytest.raises(gp.StoreError), SQLiteTurnStore(path) as store:
        await store.list_sessions()
    assert query(str(path), "SELECT max(version) FROM geppetto_schema") == [(3,)]
    assert path.read_bytes() == before


async def test_memory_store_shares_blocks_and_round_trips() -> None:
    store = MemoryTurnStore()
    session = Session(ScriptedEngine([Block.llm_text("a"), Block.llm_text("b")]), store=store)
    one = await session.run("x")
    two = await session.run("y")
    assert await store.load_session(session.session_id) == [one, two]
    assert await store.load_latest(session.session_id) == two
    assert await store.latest_seq(session.session_id) == 2


async def test_a_nul_in_the_first_prompt_is_kept_in_the_block_and_listed(store_target: str) -> None:
    turn = Turn()
    turn.append(Block.user("before\x00after"))
    with open_store(store_target) as store:
        await store.save_snapshot("nul", turn)
        [info] = await store.session_infos()
        assert info.first_prompt == "before\ufffdafter"
        latest = await store.load_latest("nul")
        assert latest is not None and latest.blocks[0].text == "before\x00after"


async def test_a_process_that_knows_an_earlier_latest_reads_only_what_another_wrote(store_target: str) -> None:
    with open_store(store_target) as mine, open_store(store_target) as other:
        session = Session(ScriptedEngine([Block.llm_text(f"a{i}") for i in range(3)]), store=mine)
        for i in range(3):
            await session.run(f"q{i}")
        known = mine._tips[session.session_id].frozen.blocks  # what this process holds of the latest
        theirs = await other.load_latest(session.session_id)
        assert theirs is not None
        theirs.blocks[1].payload["text"] = "edited elsewhere"  # an edit, a removal and appends, in another process
        del theirs.blocks[3]
        theirs.append(Block.user("more"))
        theirs.append(Block.llm_text("and more"))
        await other.save_snapshot(session.session_id, theirs)
        read = await mine.load_latest(session.session_id)
        assert read is not None and turn_to_dict(read) == turn_to_dict(theirs)
        held = mine._tips[session.session_id].frozen.blocks
        assert held[0] is known[0] and held[2] is known[2], "unchanged versions are the ones this process held"
        assert held[1] is not known[1]
