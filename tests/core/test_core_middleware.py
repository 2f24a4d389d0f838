"""Middleware: composition order, system_prompt, reorder_tool_results, logging, snapshot helpers."""

from __future__ import annotations

import asyncio
import logging

import pytest

import geppetto as gp
from geppetto.engine import Handler
from geppetto.middleware import (
    Middleware,
    logging_middleware,
    new_blocks_not_in,
    reorder_blocks,
    reorder_tool_results,
    snapshot_block_ids,
    system_prompt,
    with_middleware,
)
from geppetto.testing import FunctionEngine, ScriptedEngine
from geppetto.turns import BLOCK_META_MIDDLEWARE, TURN_META_INFERENCE_ID, TURN_META_SESSION_ID, Block, BlockKind, Turn


def _recorder(name: str, calls: list[str]) -> Middleware:
    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            calls.append(f"{name} in")
            out = await next_handler(turn)
            calls.append(f"{name} out")
            return out

        return handler

    return middleware


async def test_first_middleware_is_outermost() -> None:
    calls: list[str] = []

    def fn(turn: Turn) -> None:
        calls.append("engine")

    engine = with_middleware(FunctionEngine(fn), _recorder("a", calls), _recorder("b", calls), _recorder("c", calls))
    assert isinstance(engine, gp.Engine)
    turn = Turn()
    assert await engine.run_inference(turn) is turn
    assert calls == ["a in", "b in", "c in", "engine", "c out", "b out", "a out"]


async def test_no_middleware_runs_engine() -> None:
    engine = with_middleware(ScriptedEngine([Block.llm_text("hi")]))
    out = await engine.run_inference(Turn(id="t"))
    assert [(b.kind, b.text, b.turn_id) for b in out.blocks] == [(BlockKind.LLM_TEXT, "hi", "t")]


async def _seen_by_engine(middleware: Middleware, turn: Turn) -> Turn:
    seen: list[Turn] = []
    engine = with_middleware(FunctionEngine(lambda t: seen.append(t.clone())), middleware)
    await engine.run_inference(turn)
    return seen[0]


async def test_system_prompt_inserts_tagged_block_once() -> None:
    turn = Turn(id="t", blocks=[Block.user("hi")])
    mw = system_prompt("Be brief.")
    await _seen_by_engine(mw, turn)
    assert [(b.kind, b.text, b.turn_id, dict(b.metadata)) for b in turn.blocks] == [
        (BlockKind.SYSTEM, "Be brief.", "t", {"geppetto.middleware@v1": "system_prompt"}),
        (BlockKind.USER, "hi", "", {}),
    ]
    snapshot = turn.clone()
    seen = await _seen_by_engine(mw, turn)  # idempotent: nothing changes the second time
    assert turn == snapshot
    assert seen == snapshot


async def test_system_prompt_replaces_first_system_text() -> None:
    first = Block.system("old")
    second = Block.system("second")
    turn = Turn(blocks=[Block.user("u"), first, second])
    first_id = first.id
    await _seen_by_engine(system_prompt("new"), turn)
    assert [(b.kind, b.text) for b in turn.blocks] == [
        (BlockKind.USER, "u"),
        (BlockKind.SYSTEM, "new"),
        (BlockKind.SYSTEM, "second"),
    ]
    assert turn.blocks[1].id == first_id
    assert BLOCK_META_MIDDLEWARE.get(turn.blocks[1].metadata) == "system_prompt"
    assert dict(second.metadata) == {}


async def test_system_prompt_unchanged_leaves_block_untouched() -> None:
    block = Block.system("same")
    block.turn_id = "old-turn"
    turn = Turn(blocks=[block, Block.user("u")])
    before = block.copy()
    await _seen_by_engine(system_prompt("same"), turn)
    assert turn.blocks[0] is block
    assert (block.id, block.payload, block.turn_id, dict(block.metadata)) == (
        before.id,
        {"text": "same"},
        "old-turn",
        {},
    )
    assert len(turn.blocks) == 2


def _ids(blocks: list[Block]) -> list[str]:
    return [b.id for b in blocks]


def test_reorder_blocks_moves_results_after_their_run_in_call_order() -> None:
    user = Block.user("u")
    call_a, call_b = Block.tool_call("a", "f", {}), Block.tool_call("b", "g", {})
    text = Block.llm_text("x")
    use_b, use_a = Block.tool_use("b", 2), Block.tool_use("a", 1)
    blocks = [user, call_a, call_b, text, use_b, use_a]
    assert _ids(reorder_blocks(blocks)) == _ids([user, call_a, call_b, use_a, use_b, text])
    assert _ids(blocks) == _ids([user, call_a, call_b, text, use_b, use_a])  # input list untouched


def test_reorder_blocks_keeps_ordered_input_and_orphans() -> None:
    call_a, use_a = Block.tool_call("a", "f", {}), Block.tool_use("a", 1)
    orphan = Block.tool_use("zzz", "no call")
    call_b, use_b = Block.tool_call("b", "f", {}), Block.tool_use("b", 1)
    ordered = [Block.user("u"), call_a, use_a, orphan, call_b, use_b, Block.llm_text("done")]
    assert _ids(reorder_blocks(ordered)) == _ids(ordered)
    # an orphan result before any call stays where it is
    early = Block.tool_use("b", "early")
    assert _ids(reorder_blocks([early, call_b])) == _ids([early, call_b])
    # two runs, results out of place
    mixed = [call_a, call_b, use_b, Block.user("next"), use_a]
    assert _ids(reorder_blocks(mixed)) == _ids([call_a, call_b, use_a, use_b, mixed[3]])


async def test_reorder_tool_results_middleware() -> None:
    call_a, call_b = Block.tool_call("a", "f", {}), Block.tool_call("b", "g", {})
    use_a, use_b = Block.tool_use("a", 1), Block.tool_use("b", 2)
    turn = Turn(blocks=[Block.user("u"), call_a, call_b, use_b, use_a])
    seen = await _seen_by_engine(reorder_tool_results(), turn)
    assert _ids(turn.blocks) == _ids([turn.blocks[0], call_a, call_b, use_a, use_b])
    assert _ids(seen.blocks) == _ids(turn.blocks)
    # already ordered: same block objects, same list
    blocks_list = turn.blocks
    before = list(turn.blocks)
    await _seen_by_engine(reorder_tool_results(), turn)
    assert turn.blocks is blocks_list
    assert all(x is y for x, y in zip(turn.blocks, before, strict=True))


def test_snapshot_and_new_blocks() -> None:
    turn = Turn(blocks=[Block.user("a"), Block.llm_text("b")])
    ids = snapshot_block_ids(turn)
    assert ids == {b.id for b in turn.blocks}
    assert new_blocks_not_in(turn, ids) == []
    added = [turn.append(Block.tool_call("c", "f", {})), turn.append(Block.tool_use("c", 1))]
    found = new_blocks_not_in(turn, ids)
    assert [id(b) for b in found] == [id(b) for b in added]  # the blocks themselves, in order
    assert new_blocks_not_in(turn, set()) == turn.blocks


async def test_logging_middleware_logs_ids_and_counts(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.core.inference")
    turn = Turn(id="t-1", blocks=[Block.user("hi")])
    TURN_META_SESSION_ID.set(turn.metadata, "s-1")
    TURN_META_INFERENCE_ID.set(turn.metadata, "i-1")
    engine = with_middleware(ScriptedEngine([[Block.llm_text("a"), Block.llm_text("b")]]), logging_middleware(logger))
    with caplog.at_level(logging.INFO, logger="test.core.inference"):
        await engine.run_inference(turn)
    records = [r for r in caplog.records if r.name == "test.core.inference"]
    assert [r.levelno for r in records] == [logging.INFO, logging.INFO]
    # the ids and counts are in the message itself, for handlers that print only the message
    assert records[0].getMessage() == "inference start session=s-1 inference=i-1 turn=t-1 blocks=1"
    done = records[1].getMessage()
    a, b = (blk.id for blk in turn.blocks[1:])
    assert done.startswith(f"inference done session=s-1 inference=i-1 turn=t-1 blocks=3 added=2 new=[{a} {b}] in ")
    assert done.endswith("s") and float(done.rsplit(" ", 1)[1][:-1]) >= 0
    ids = {"session_id": "s-1", "inference_id": "i-1", "turn_id": "t-1"}
    first = turn.blocks[0].id
    assert records[0].geppetto == {**ids, "blocks": 1, "block_ids": [first]}  # type: ignore[attr-defined]
    assert records[1].geppetto == {  # type: ignore[attr-defined]
        **ids,
        "blocks": 3,
        "added": 2,
        "block_ids": [first, a, b],
        "new_block_ids": [a, b],
    }


async def test_logging_middleware_shows_unset_ids_as_a_dash(caplog: pytest.LogCaptureFixture) -> None:
    engine = with_middleware(ScriptedEngine([Block.llm_text("a")]), logging_middleware())
    with caplog.at_level(logging.INFO, logger="geppetto.inference"):
        await engine.run_inference(Turn(id="t-0"))
    messages = [r.getMessage() for r in caplog.records if r.name == "geppetto.inference"]
    assert messages[0] == "inference start session=- inference=- turn=t-0 blocks=0"
    assert messages[1].startswith("inference done session=- inference=- turn=t-0 blocks=1 added=1 new=[")


async def test_logging_middleware_logs_failure_and_reraises(caplog: pytest.LogCaptureFixture) -> None:
    engine = with_middleware(ScriptedEngine([]), logging_middleware())
    turn = Turn(id="t-2")
    TURN_META_SESSION_ID.set(turn.metadata, "s-2")
    with caplog.at_level(logging.INFO, logger="geppetto.inference"), pytest.raises(gp.UsageError):
        await engine.run_inference(turn)
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "geppetto.inference"]
    assert records[0] == (logging.INFO, "inference start session=s-2 inference=- turn=t-2 blocks=0")
    assert records[1][0] == logging.ERROR
    assert records[1][1].startswith(
        "inference failed session=s-2 inference=- turn=t-2 blocks=0: UsageError: ScriptedEngine has no step left"
    )
    assert len(records) == 2


async def test_logging_middleware_logs_cancellation_as_cancelled_not_error(caplog: pytest.LogCaptureFixture) -> None:
    started = asyncio.Event()

    async def slow(turn: Turn) -> None:
        turn.append(Block.llm_text("partial"))
        started.set()
        await asyncio.sleep(3600)

    turn = Turn(id="t-3", blocks=[Block.user("go")])
    TURN_META_INFERENCE_ID.set(turn.metadata, "i-3")
    engine = with_middleware(FunctionEngine(slow), logging_middleware())
    with caplog.at_level(logging.DEBUG, logger="geppetto.inference"):
        task = asyncio.create_task(engine.run_inference(turn))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    records = [r for r in caplog.records if r.name == "geppetto.inference"]
    assert [r.levelno for r in records] == [logging.INFO, logging.INFO]  # nothing at ERROR
    assert records[1].getMessage().startswith("inference cancelled session=- inference=i-3 turn=t-3 blocks=2 after ")
    assert records[1].geppetto == {  # type: ignore[attr-defined]
        "session_id": "",
        "inference_id": "i-3",
        "turn_id": "t-3",
        "blocks": 2,
        "cancelled": True,
    }
    assert records[1].exc_info is None
