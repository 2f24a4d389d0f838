"""A fresh Turn id per inference (seed 002, Policy A): an inference never runs as a ``Turn.id`` that an
earlier inference already used, however the caller builds the next turn."""

from __future__ import annotations

from geppetto.session import MemoryTurnStore, Session
from geppetto.testing import ScriptedEngine
from geppetto.turns import BLOCK_META_INFERENCE_ID, TURN_META_INFERENCE_ID, Block, Turn

IID = str(BLOCK_META_INFERENCE_ID)


def _engine(n: int) -> ScriptedEngine:
    return ScriptedEngine([Block.llm_text(f"A{i}") for i in range(1, n + 1)])


async def test_a_second_run_with_no_new_prompt_gets_a_fresh_turn_id() -> None:
    session = Session(_engine(2))
    out1 = await session.run("U1")
    handle = session.start_inference()  # again, on the latest output: no new prompt
    out2 = await handle.wait()
    assert out2.id == handle.turn_id != out1.id
    assert TURN_META_INFERENCE_ID.get(out2.metadata) == handle.inference_id
    # the block it made carries its own turn and inference; the earlier ones keep theirs
    assert [(b.text, b.turn_id) for b in out2.blocks] == [("U1", out1.id), ("A1", out1.id), ("A2", out2.id)]
    assert out2.blocks[-1].metadata[IID] == handle.inference_id
    assert out2.blocks[1].metadata[IID] == TURN_META_INFERENCE_ID.get(out1.metadata)


async def test_append_of_a_clone_of_the_latest_gets_a_fresh_turn_id() -> None:
    session = Session(_engine(2))
    out1 = await session.run("U1")
    seed = out1.clone()
    seed.append(Block.user("U2"))
    assert seed.id == out1.id  # the clone keeps the id the first inference ran as
    session.append(seed)
    handle = session.start_inference()
    out2 = await handle.wait()
    assert out2.id == handle.turn_id not in (out1.id, "")
    # the new user block was stamped with the turn it was actually sent in
    assert [(b.text, b.turn_id) for b in out2.blocks[2:]] == [("U2", out2.id), ("A2", out2.id)]
    assert session.history[-2].id == seed.id == out1.id  # the seed in the history is left as it was


async def test_the_same_turn_given_twice_runs_as_two_turns() -> None:
    session = Session(_engine(2))
    turn = Turn(id="t-mine")
    turn.append(Block.user("U1"))
    session.append(turn)
    first = await session.start_inference().wait()
    assert first.id == "t-mine"  # a turn no inference ran as keeps its id (Policy A: seed and output share it)
    again = Turn(id="t-mine")
    again.append(Block.user("U1 again"))
    session.append(again)
    second = await session.start_inference().wait()
    assert second.id not in ("t-mine", "")


async def test_a_restored_session_run_again_gets_a_fresh_turn_id() -> None:
    store = MemoryTurnStore()
    session = Session(_engine(1), store=store)
    out1 = await session.run("U1")
    restored = await Session.restore(_engine(1), store, session.session_id)
    out2 = await restored.start_inference().wait()
    assert out2.id != out1.id
    assert [t.id for t in await store.load_session(session.session_id)] == [out1.id, out2.id]


async def test_each_prompt_still_gets_its_own_id_shared_by_seed_and_output() -> None:
    session = Session(_engine(2))
    seeds, outs = [], []
    for text in ("U1", "U2"):
        seeds.append(session.prompt(text))
        outs.append(await session.start_inference().wait())
    assert [s.id for s in seeds] == [o.id for o in outs] and seeds[0].id != seeds[1].id
