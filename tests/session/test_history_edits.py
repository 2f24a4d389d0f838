"""History edits on a Session (rewind, fork, edit, remove) against the simulator, in chained and
conversation mode: each re-anchors the next request (the simulator's context equals the Turn) and is
kept in the store as a snapshot saying what was done."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine, get_state
from geppetto.providers.openai_responses._items import blocks_to_items
from geppetto.providers.openai_responses._state import visible
from geppetto.session import MemoryTurnStore
from geppetto.session._edits import EDITED_BY
from geppetto.session.stores import open_store
from geppetto.simulator import Reply, Simulator
from geppetto.turns import BLOCK_META_MIDDLEWARE, BLOCK_META_RESPONSE_ID, Block, Turn
from geppetto.turns._known import TURN_META_HISTORY_EDIT


def normalize(items: list[Any]) -> list[tuple[Any, ...]]:
    """Items reduced to what the model reads."""
    return [visible(i) for i in items]


def wire_before_last_response(turn: Turn) -> tuple[str, list[tuple[Any, ...]]]:
    """The last response id and the Turn's wire form before that response's blocks."""
    last = max(i for i, b in enumerate(turn.blocks) if b.metadata.get(RID))
    rid = turn.blocks[last].metadata[RID]
    first = min(i for i, b in enumerate(turn.blocks) if b.metadata.get(RID) == rid)
    return rid, normalize(blocks_to_items(turn.blocks[:first]))


RID = str(BLOCK_META_RESPONSE_ID)
MODES = ["chained", "conversation"]


def _engine(sim: Simulator, mode: str) -> ResponsesEngine:
    return ResponsesEngine("sim-1", api_key="sk-test", base_url=sim.openai_url, mode=mode)


async def _session(sim: Simulator, mode: str, store: Any = None, prompts: int = 3) -> gp.Session:
    sim.queue(*(Reply(text=f"Answer {i}.") for i in range(12)))
    session = gp.Session(_engine(sim, mode), store=store, record_events=store is not None)
    for i in range(prompts):
        await session.run(f"prompt {i}")
    return session


def _rids(turn: Turn) -> list[str]:
    return list(dict.fromkeys(b.metadata[RID] for b in turn.blocks if b.metadata.get(RID)))


def _texts(turn: Turn) -> list[str]:
    return [b.text for b in turn.blocks]


def _assert_context_is_the_turn(sim: Simulator, turn: Turn) -> None:
    rid, before = wire_before_last_response(turn)
    assert normalize(sim.context_items(rid)) == before


def _last_body(sim: Simulator) -> dict[str, Any]:
    return [r for r in sim.requests if r.path == "/v1/responses"][-1].body


@pytest.mark.parametrize("mode", MODES)
async def test_rewind_drops_the_last_prompts_and_reanchors(geppetto_sim: Simulator, mode: str) -> None:
    session = await _session(geppetto_sim, mode)
    first = _rids(session.latest)[0]  # type: ignore[arg-type]
    before = len(session.history)
    rewound = await session.rewind(2)
    assert _texts(rewound) == ["prompt 0", "Answer 0."]
    assert session.latest is rewound and len(session.history) == before + 1
    assert TURN_META_HISTORY_EDIT.get(rewound.metadata)["op"] == "rewind"  # type: ignore[index]
    out = await session.run("again")
    body = _last_body(geppetto_sim)
    assert normalize(body["input"]) == [("message", "user", "again")]
    if mode == "chained":
        assert body["previous_response_id"] == first
    else:
        cid = get_state(rewound).conversation_id  # type: ignore[union-attr]
        assert body["conversation"] == cid
        held = geppetto_sim.state.conversations[str(cid)].items
        assert normalize(held) == normalize(blocks_to_items(out.blocks))
    _assert_context_is_the_turn(geppetto_sim, out)


@pytest.mark.parametrize("mode", MODES)
async def test_edit_and_remove_reanchor_before_the_change(geppetto_sim: Simulator, mode: str) -> None:
    session = await _session(geppetto_sim, mode)
    latest = session.latest
    assert latest is not None
    rids = _rids(latest)
    target = next(b for b in latest.blocks if b.text == "Answer 1.")
    edited = await session.edit(target.id, "Answer 1, edited.")
    changed = next(b for b in edited.blocks if b.id == target.id)
    assert changed.text == "Answer 1, edited." and BLOCK_META_MIDDLEWARE.get(changed.metadata) == EDITED_BY
    assert latest.blocks[3].text == "Answer 1."  # the snapshot before is unchanged
    out = await session.run("after edit")
    body = _last_body(geppetto_sim)
    if mode == "chained":
        assert body["previous_response_id"] == rids[0]
    else:
        assert "previous_response_id" not in body
    assert normalize(body["input"])[0] == ("message", "user", "prompt 1")
    _assert_context_is_the_turn(geppetto_sim, out)
    removed = await session.remove(next(b.id for b in out.blocks if b.text == "prompt 2"))
    assert "prompt 2" not in _texts(removed)
    out = await session.run("after remove")
    _assert_context_is_the_turn(geppetto_sim, out)


async def test_fork_in_chained_mode_continues_both_from_the_shared_response(geppetto_sim: Simulator) -> None:
    session = await _session(geppetto_sim, "chained", prompts=2)
    shared = _rids(session.latest)[-1]  # type: ignore[arg-type]
    child = await session.fork()
    assert child.session_id != session.session_id
    assert _texts(child.latest) == _texts(session.latest)  # type: ignore[arg-type]
    edit = TURN_META_HISTORY_EDIT.get(child.latest.metadata)  # type: ignore[union-attr]
    assert edit == {"op": "fork", "from": session.session_id, "turn": session.latest.id}  # type: ignore[union-attr]
    a = await session.run("left")
    assert _last_body(geppetto_sim)["previous_response_id"] == shared
    b = await child.run("right")
    assert _last_body(geppetto_sim)["previous_response_id"] == shared
    assert _texts(a)[-2] == "left" and _texts(b)[-2] == "right"
    _assert_context_is_the_turn(geppetto_sim, a)
    _assert_context_is_the_turn(geppetto_sim, b)


async def test_fork_in_conversation_mode_gets_its_own_conversation(geppetto_sim: Simulator) -> None:
    session = await _session(geppetto_sim, "conversation", prompts=2)
    cid = get_state(session.latest).conversation_id  # type: ignore[arg-type,union-attr]
    child = await session.fork()
    b = await child.run("right")
    assert get_state(b).conversation_id not in (None, cid)  # type: ignore[union-attr]
    a = await session.run("left")
    body = _last_body(geppetto_sim)
    assert body["conversation"] == cid and normalize(body["input"]) == [("message", "user", "left")]
    for out in (a, b):
        _assert_context_is_the_turn(geppetto_sim, out)
        held = geppetto_sim.state.conversations[str(get_state(out).conversation_id)].items  # type: ignore[union-attr]
        assert normalize(held) == normalize(blocks_to_items(out.blocks))


async def test_bad_edits_name_the_fix(geppetto_sim: Simulator) -> None:
    session = gp.Session(_engine(geppetto_sim, "chained"))
    with pytest.raises(gp.UsageError, match=r"call session\.run"):
        await session.rewind(1)
    session = await _session(geppetto_sim, "chained", prompts=1)
    with pytest.raises(gp.UsageError, match="holds 1"):
        await session.rewind(2)
    with pytest.raises(gp.UsageError, match="at least 1"):
        await session.rewind(0)
    with pytest.raises(gp.UsageError, match="no block 'nope'"):
        await session.edit("nope", "x")
    with pytest.raises(gp.UsageError, match="needs the new text"):
        await session.edit(session.latest.blocks[0].id)  # type: ignore[union-attr]


def _stores(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    kind = request.param
    if kind == "memory":
        return MemoryTurnStore()
    if kind == "sqlite":
        return open_store(tmp_path / "sessions.db")
    return open_store(request.getfixturevalue("postgres_target"))


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    return _stores(tmp_path, request)


@pytest.mark.parametrize("mode", MODES)
async def test_history_edits_are_kept_in_the_store(geppetto_sim: Simulator, store: Any, mode: str) -> None:
    session = await _session(geppetto_sim, mode, store=store)
    await session.rewind(2)
    await session.run("prompt 1")
    target = next(b for b in session.latest.blocks if b.text == "Answer 0.")  # type: ignore[union-attr]
    await session.edit(target.id, "Answer 0, edited.")
    child = await session.fork(session_id="forked")
    saved = await store.load_session(session.session_id)
    ops = [(TURN_META_HISTORY_EDIT.get(t.metadata) or {}).get("op") for t in saved]
    assert ops == [None, None, None, "rewind", None, "edit"]
    assert _texts(saved[-1]) == _texts(session.latest)  # type: ignore[arg-type]
    (forked,) = await store.load_session("forked")
    assert _texts(forked) == _texts(session.latest)  # type: ignore[arg-type]
    assert TURN_META_HISTORY_EDIT.get(forked.metadata)["from"] == session.session_id  # type: ignore[index]
    # a restored session goes on from the edited history, re-anchoring as a live one would
    restored = await gp.Session.restore(_engine(geppetto_sim, mode), store, session.session_id)
    out = await restored.run("next")
    assert _texts(out)[:4] == ["prompt 0", "Answer 0, edited.", "prompt 1", "Answer 3."]
    _assert_context_is_the_turn(geppetto_sim, out)
    out = await (await gp.Session.restore(_engine(geppetto_sim, mode), store, child.session_id)).run("fork next")
    _assert_context_is_the_turn(geppetto_sim, out)
    if hasattr(store, "close"):
        store.close()


async def test_rewind_counts_prompts_after_a_compaction_summary_and_keeps_it() -> None:
    from geppetto.middleware.compaction import COMPACTION

    summary = Block.user("Summary of the conversation so far: ...")
    COMPACTION.set(summary.metadata, {"replaced": ["a", "b"], "compactor": "summarize"})
    session = gp.Session(gp.ScriptedEngine([Block.llm_text("one"), Block.llm_text("two")]))
    session.append(Turn(blocks=[Block.system("sys"), summary, Block.llm_text("ok")]))
    await session.run("p1")
    await session.run("p2")
    with pytest.raises(gp.UsageError, match=r"holds 2 .*compaction summary"):
        await session.rewind(3)
    rewound = await session.rewind(2)
    assert _texts(rewound) == ["sys", summary.text, "ok"]
    assert COMPACTION.get(rewound.blocks[1].metadata) == {"replaced": ["a", "b"], "compactor": "summarize"}


async def test_remove_takes_a_tool_call_with_its_result() -> None:
    call = Block.tool_call("c1", "lookup", {"q": "x"})
    session = gp.Session(gp.ScriptedEngine())
    session.append(Turn(blocks=[Block.user("hi"), call, Block.tool_use("c1", "found"), Block.llm_text("done")]))
    out = await session.remove(call.id)
    assert [b.kind.value for b in out.blocks] == ["user", "llm_text"]
    assert TURN_META_HISTORY_EDIT.get(out.metadata)["op"] == "remove"  # type: ignore[index]
    assert len(TURN_META_HISTORY_EDIT.get(out.metadata)["removed"]) == 2  # type: ignore[index]
