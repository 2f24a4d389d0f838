"""The wire-form memo under the anchor scan: a fingerprint with remembered wire forms always equals one made
from scratch, whatever was edited in place between scans."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from geppetto.providers.openai_responses._anchors import _MEMO, _same, prefix_fingerprint, scan_anchors, tag_blocks
from geppetto.turns import Block, BlockKind, Turn


def _fresh(turn: Turn) -> str:
    """The Turn's fingerprint from copies that remember nothing."""
    blocks = [copy.deepcopy(b) for b in turn.blocks]
    for b in blocks:
        b.__dict__.pop(_MEMO, None)
    return prefix_fingerprint(blocks)


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
    return turn


def _edit(kind: BlockKind, change: Any) -> Any:
    """An edit of the Turn's first block of ``kind`` (none when the Turn no longer has one)."""

    def run(turn: Turn) -> None:
        block = next((b for b in turn.blocks if b.kind is kind), None)
        if block is not None:
            change(block)

    return run


EDITS: list[Any] = [
    _edit(BlockKind.USER, lambda b: b.payload.update(text="weather in Rome?")),
    _edit(BlockKind.TOOL_CALL, lambda b: b.payload["args"].update(city="Rome")),
    _edit(BlockKind.TOOL_CALL, lambda b: b.payload.update(args={"units": "C", "city": "Paris"})),  # reordered
    _edit(BlockKind.TOOL_USE, lambda b: b.payload.update(result={"temp": 18.0, "sky": ["rain"]})),  # 18 -> 18.0
    _edit(BlockKind.TOOL_USE, lambda b: b.payload.update(result={"temp": True, "sky": ["rain"]})),  # 18 -> true
    _edit(BlockKind.TOOL_USE, lambda b: b.payload.update(result={"temp": 18, "sky": ["rain", "wind"]})),
    _edit(BlockKind.SYSTEM, lambda b: setattr(b, "role", "developer")),
    _edit(BlockKind.LLM_TEXT, lambda b: setattr(b, "kind", BlockKind.USER)),
    _edit(BlockKind.LLM_TEXT, lambda b: b.payload.update(text="18C, rain")),
    _edit(BlockKind.USER, lambda b: b.payload.update(images=[{"url": "https://example.com/a.png"}])),
    lambda t: t.blocks.insert(1, Block.user("first")),
    lambda t: t.blocks.pop() if t.blocks else None,  # removing from an emptied Turn removes nothing
    lambda t: None,
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(range(len(EDITS))), max_size=6))
@example(edits=[11] * 6)  # more removals than blocks: once popped from an empty Turn
def test_fingerprints_with_the_memo_equal_fresh_ones_after_any_edits(edits: list[int]) -> None:
    turn = _turn()
    scan_anchors(turn)  # every block now remembers its wire form
    for i in edits:
        EDITS[i](turn)
        assert scan_anchors(turn).hasher.hexdigest() == _fresh(turn)


def test_an_edit_in_place_is_seen_and_the_anchor_is_refused() -> None:
    turn = _turn()
    assert scan_anchors(turn).best() == "resp_1"
    turn.blocks[2].payload["args"]["city"] = "Rome"  # the call the server holds said Paris
    assert scan_anchors(turn).best() is None


def test_same_is_json_equality() -> None:
    assert _same({"a": 1, "b": [1, "x"]}, {"a": 1, "b": [1, "x"]})
    assert not _same({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not _same({"a": 1}, {"a": 1.0})
    assert not _same({"a": 1}, {"a": True})
    assert not _same([1, 2], [1, 2, 3])
