"""Schema 5: the per-session summary the dashboard reads, kept in the transaction of each save from that
inference's events, equals the totals computed from the whole history; events read by a window of time."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from store_support import query

from geppetto.events import EventError, EventFinal, EventMetadata, EventTextDelta
from geppetto.session import Session
from geppetto.session.stores import SQLiteTurnStore, open_store
from geppetto.session.stores._schema import SCHEMA_VERSION
from geppetto.testing import ScriptedEngine
from geppetto.turns import Block
from geppetto.web import session_totals

FIXTURES = Path(__file__).parent / "fixtures"


async def _from_history(store: object, session_id: str) -> dict[str, object]:
    return session_totals(await store.load_session(session_id), await store.load_events(session_id))["totals"]  # type: ignore[attr-defined]


async def test_the_kept_summary_is_the_totals_of_the_whole_history(store_target: str) -> None:
    with open_store(store_target) as store:
        session = Session(ScriptedEngine([Block.llm_text(f"a{i}") for i in range(4)]), store=store, record_events=True)
        for i in range(3):
            await session.run(f"q{i}")
        # an inference that saved no snapshot: its error and a final without a snapshot count too
        meta = EventMetadata(inference_id="failed", extra={"responses.mode": "chained", "responses.full": False})
        failed = [
            (1.0, EventTextDelta(meta, delta="x")),
            (1.5, EventFinal(meta, text="x")),
            (2.0, EventError(meta, message="boom", error_type="rate_limited")),
        ]
        await store.save_events(session.session_id, "failed", failed)
        await session.run("q3")
        await Session(ScriptedEngine([Block.llm_text("b")]), store=store, session_id="unlogged").run("hi")

        summaries, more = await store.session_summaries()
        assert not more
        by_id = {s.session_id: s for s in summaries}
        assert list(by_id) == [session.session_id, "unlogged"]
        kept = by_id[session.session_id]
        expected = await _from_history(store, session.session_id)
        assert kept.totals == expected
        assert (expected["requests"], expected["rejections"], expected["rejection_types"]) == (
            5,
            1,
            {"rate_limited": 1},
        )
        assert kept.events == len(await store.load_events(session.session_id))
        # no event log: nothing kept, the dashboard infers from the latest snapshot
        assert (by_id["unlogged"].events, by_id["unlogged"].totals) == (0, None)

        last, more = await store.session_summaries(limit=1)
        assert more and [s.session_id for s in last] == ["unlogged"]

        await store.delete_session(session.session_id)
        assert [s.session_id for s in (await store.session_summaries())[0]] == ["unlogged"]
    assert query(store_target, "SELECT count(*) FROM session_summaries") == [(0,)]


async def test_events_and_inferences_by_a_window_of_time(store_target: str) -> None:
    with open_store(store_target) as store:
        session = Session(ScriptedEngine([Block.llm_text(f"a{i}") for i in range(4)]), store=store, record_events=True)
        for i in range(4):
            await session.run(f"q{i}")
        infos = await store.snapshot_infos(session.session_id)
        every = await store.load_events(session.session_id)
        window = await store.load_events(session.session_id, after=infos[0].saved_at, until=infos[2].saved_at)
        inferences = {i.inference_id for i in infos[1:3]}
        assert window == [e for e in every if e.inference_id in inferences] and window
        tail = await store.load_events(session.session_id, after=infos[2].saved_at)
        assert {e.inference_id for e in tail} == {infos[3].inference_id}


async def test_a_migrated_store_has_the_summaries_of_its_history(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    shutil.copy(FIXTURES / "store_v3.db", path)
    with SQLiteTurnStore(path) as store:
        summaries, _ = await store.session_summaries()
        by_id = {s.session_id: s for s in summaries}
        assert by_id["chat-1"].totals == await _from_history(store, "chat-1")
        assert by_id["chat-1"].totals is not None and by_id["chat-1"].totals["requests"] == 3
        assert by_id["chat-1"].events == len(await store.load_events("chat-1"))
        assert by_id["edits"].totals is None  # no event log
        # the next save adds to the migrated summary
        session = await Session.restore(ScriptedEngine([Block.llm_text("more")]), store, "chat-1", record_events=True)
        await session.run("go on")
        (kept,) = [s for s in (await store.session_summaries())[0] if s.session_id == "chat-1"]
        assert kept.totals == await _from_history(store, "chat-1")
    assert query(str(path), "SELECT max(version) FROM geppetto_schema") == [(SCHEMA_VERSION,)]
    assert json.loads(query(str(path), "SELECT totals FROM session_summaries")[0][0])["requests"] == 4
