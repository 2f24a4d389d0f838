"""The incremental anchor proof: a scan that trusts what an earlier scan proved about the Turn's first blocks
finds exactly what a scan of the whole Turn from scratch finds, whatever was changed in between (edits in
place at any depth, new attributes, list changes of every kind, metadata the proof reads, clones), and
it reads only the new blocks when nothing before them changed."""

from __future__ import annotations

import copy
import pickle
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from geppetto.providers._chain import AnchorScan
from geppetto.providers.openai_responses._answer import tag_blocks
from geppetto.providers.openai_responses._items import RESPONSE_BLOCKS
from geppetto.providers.openai_responses._request import scan_anchors
from geppetto.turns import BLOCK_META_INFERENCE_ID, BLOCK_META_RESPONSE_ID, Block, BlockKind, Turn, dumps_yaml
from geppetto.turns._watch import WatchedDict, same_json


def _fresh(turn: Turn) -> AnchorScan:
    """A scan of plain copies that remember nothing."""
    return scan_anchors(Turn(blocks=[copy.deepcopy(b) for b in turn.blocks], data=copy.deepcopy(turn.data)))


def _same_result(a: AnchorScan, b: AnchorScan) -> None:
    assert a.hasher.hexdigest() == b.hasher.hexdigest()
    assert a.best() == b.best()
    assert a.reason_code() == b.reason_code()
    assert {rid: s.problem() for rid, s in a.spans.items()} == {rid: s.problem() for rid, s in b.spans.items()}


def _turn() -> Turn:
    turn = Turn()
    for block in (
        Block.system("be brief"),
        Block.user("weather?"),
        Block.tool_call("c1", "get_weather", {"city": "Paris", "units": "C"}),
        Block.tool_use("c1", {"temp": 18, "sky": ["rain"]}),
        Block.llm_text("18C and rain"),
    ):
        turn.append(block)
    tag_blocks(turn, 2, "resp_1")
    tag_blocks(turn, 4, "resp_2")
    return turn


def _first(kind: BlockKind, change: Callable[[Block], Any]) -> Callable[[Turn], None]:
    def run(turn: Turn) -> None:
        block = next((b for b in turn.blocks if b.kind is kind), None)
        if block is not None:
            change(block)

    return run


def _respond(turn: Turn) -> None:
    """A new tagged response (two blocks) appended, as the engine does."""
    start = len(turn.blocks)
    turn.append(Block.llm_text(f"answer {start}"))
    turn.append(Block.tool_call(f"c{start}", "f", {"n": start}))
    tag_blocks(turn, start, f"resp_{start}")
    turn.append(Block.tool_use(f"c{start}", {"temp": start, "sky": ["fog"]}))


EDITS: list[Callable[[Turn], Any]] = [
    _first(BlockKind.USER, lambda b: b.payload.update(text="weather in Rome?")),
    _first(BlockKind.USER, lambda b: b.payload.__setitem__("text", "weather?")),  # maybe the same value
    _first(BlockKind.TOOL_CALL, lambda b: b.payload["args"].update(city="Rome")),
    _first(BlockKind.TOOL_CALL, lambda b: b.payload["args"].pop("units", None)),
    _first(BlockKind.TOOL_CALL, lambda b: b.payload.update(args={"units": "C", "city": "Paris"})),  # reordered
    _first(BlockKind.TOOL_USE, lambda b: b.payload.update(result={"temp": 18.0, "sky": ["rain"]})),  # 18 -> 18.0
    _first(BlockKind.TOOL_USE, lambda b: b.payload.update(result={"temp": True, "sky": ["rain"]})),  # 18 -> true
    _first(BlockKind.TOOL_USE, lambda b: b.payload["result"]["sky"].append("wind")),
    _first(BlockKind.TOOL_USE, lambda b: b.payload["result"]["sky"].sort(reverse=True)),
    _first(BlockKind.TOOL_USE, lambda b: b.payload["result"].__setitem__("sky", ["sun"])),
    _first(BlockKind.SYSTEM, lambda b: setattr(b, "role", "developer")),
    _first(BlockKind.LLM_TEXT, lambda b: setattr(b, "kind", BlockKind.USER)),
    _first(BlockKind.LLM_TEXT, lambda b: setattr(b, "payload", {"text": "18C, rain"})),
    _first(BlockKind.USER, lambda b: b.payload.update(images=[{"url": "https://example.com/a.png"}])),
    _first(BlockKind.USER, lambda b: b.payload.clear()),
    _first(BlockKind.LLM_TEXT, lambda b: BLOCK_META_RESPONSE_ID.delete(b.metadata)),
    _first(BlockKind.LLM_TEXT, lambda b: RESPONSE_BLOCKS.set(b.metadata, 5)),
    _first(BlockKind.LLM_TEXT, lambda b: setattr(b, "metadata", {})),
    _first(BlockKind.USER, lambda b: BLOCK_META_INFERENCE_ID.set(b.metadata, "inf")),  # not read: no change
    lambda t: t.blocks.insert(1, Block.user("first")),
    lambda t: t.insert(0, Block.system("new system")),
    lambda t: t.blocks.pop() if t.blocks else None,
    lambda t: t.blocks.pop(1) if len(t.blocks) > 1 else None,
    lambda t: t.blocks.__delitem__(slice(0, 1)),
    lambda t: t.blocks.__setitem__(slice(1, 2), [Block.user("swapped in")]) if len(t.blocks) > 1 else None,
    lambda t: t.blocks.reverse(),
    lambda t: t.blocks.sort(key=lambda b: str(b.kind)),
    lambda t: t.blocks.remove(t.blocks[0]) if t.blocks else None,
    lambda t: t.blocks.__setitem__(-1, Block.user("last replaced")) if t.blocks else None,
    lambda t: setattr(t, "blocks", list(reversed(t.blocks))),
    lambda t: t.append(Block.user("appended")),
    _respond,
    _respond,
    lambda t: None,
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(range(len(EDITS))), st.booleans()), max_size=8))
@example(edits=[(21, False)] * 7)  # more removals than blocks
@example(edits=[(31, True), (2, False), (31, False)])  # an edit of a proven block, then more blocks
def test_the_incremental_scan_equals_a_scan_from_scratch_after_any_changes(edits: list[tuple[int, bool]]) -> None:
    turn = _turn()
    scan_anchors(turn, incremental=True)
    for i, clone in edits:
        EDITS[i](turn)
        if clone:
            turn = turn.clone()
        _same_result(scan_anchors(turn, incremental=True), _fresh(turn))


def test_only_new_blocks_are_read_while_nothing_before_them_changes() -> None:
    turn = _turn()
    first = scan_anchors(turn, incremental=True)
    assert (first.rescanned, first.hashed, first.best()) == (True, 5, "resp_2")
    _respond(turn)
    again = scan_anchors(turn, incremental=True)
    assert (again.rescanned, again.hashed, again.best()) == (False, 3, "resp_5")
    BLOCK_META_INFERENCE_ID.set(turn.blocks[1].metadata, "inf")  # a stamp the proof does not read
    turn.blocks[1].payload["text"] = "weather?"  # the value it already holds
    assert scan_anchors(turn, incremental=True).rescanned is False
    turn.blocks[2].payload["args"]["city"] = "Rome"  # the call the server holds said Paris
    edited = scan_anchors(turn, incremental=True)
    assert (edited.rescanned, edited.best()) == (True, None)


def test_a_clone_keeps_the_proof_and_its_own_changes() -> None:
    turn = _turn()
    scan_anchors(turn, incremental=True)
    copy_ = turn.clone()
    assert scan_anchors(copy_, incremental=True).rescanned is False
    copy_.blocks[1].payload["text"] = "changed in the copy"
    assert scan_anchors(copy_, incremental=True).best() is None
    assert turn.blocks[1].text == "weather?"
    assert scan_anchors(turn, incremental=True).rescanned is False  # the original did not change


def test_a_sealed_block_stays_plain_data() -> None:
    turn = _turn()
    scan_anchors(turn, incremental=True)
    block = turn.blocks[3]
    assert type(block.payload) is WatchedDict and block == block.copy() and block.copy() == block
    assert type(block.copy()) is Block and type(block.copy().payload) is dict
    assert type(copy.deepcopy(block.payload)) is dict
    assert type(pickle.loads(pickle.dumps(block))) is Block
    assert repr(block).startswith("Block(")
    assert "temp: 18" in dumps_yaml(turn) and turn == turn.clone()


def test_a_value_that_cannot_be_watched_is_checked_every_time() -> None:
    turn = _turn()
    result = OrderedDict(rows=[1])  # a dict of another type: kept as it is, so it is not watched
    turn.blocks[3].payload["result"] = result
    start = len(turn.blocks)
    turn.append(Block.llm_text("done"))
    tag_blocks(turn, start, "resp_3")
    assert scan_anchors(turn, incremental=True).best() == "resp_3"
    result["rows"].append(2)  # changes the tool output the server holds, behind the Turn's back
    assert scan_anchors(turn, incremental=True).best() is None


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ({"a": 1, "b": [1, "x"]}, {"a": 1, "b": [1, "x"]}, True),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, False),
        ({"a": 1}, {"a": 1.0}, False),
        ({"a": 1}, {"a": True}, False),
        ([1, 2], [1, 2, 3], False),
    ],
)
def test_same_json_is_json_equality(a: Any, b: Any, same: bool) -> None:
    assert same_json(a, b) is same
