"""The cold anchor check (issue 36): on a Turn whose blocks are still the frozen versions a store loaded
(a resumed session), the scan reads them in place, without copying them, and remembers their wire form on
them; the proof still catches any change made afterwards, since a read of a proven frozen block gets a
copy sealed for the proof."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_anchor_memo import EDITS, _fresh, _respond, _same_result, _turn

from geppetto.providers.openai_responses._anchors import scan_anchors
from geppetto.turns import Turn
from geppetto.turns._cow import FrozenBlock, LazyBlockList, freeze


def _loaded() -> Turn:
    """``_turn()`` as a store hands it out: a lazy list over frozen versions."""
    turn = _turn()
    return Turn(freeze(list(turn.blocks), None).lazy(), turn.id)


def test_a_loaded_turn_is_scanned_without_copying_its_blocks() -> None:
    turn = _loaded()
    blocks = turn.blocks
    assert isinstance(blocks, LazyBlockList)
    first = scan_anchors(turn, incremental=True)
    assert (first.rescanned, first.best()) == (True, "resp_2")
    assert all(type(list.__getitem__(blocks, i)) is FrozenBlock for i in range(len(blocks)))  # none copied
    _same_result(first, _fresh(_turn()))
    _respond(turn)
    again = scan_anchors(turn, incremental=True)
    assert (again.rescanned, again.hashed, again.best()) == (False, 3, "resp_5")
    turn.blocks[2].payload["args"]["city"] = "Rome"  # a read copies the proven block, sealed: the edit counts
    edited = scan_anchors(turn, incremental=True)
    assert (edited.rescanned, edited.best()) == (True, None)


@settings(max_examples=200, deadline=None)
@example(edits=[(4, False), (1, True)])  # a tool call's arguments reordered, then a clone: the clone keeps it
@given(st.lists(st.tuples(st.sampled_from(range(len(EDITS))), st.booleans()), max_size=8))
def test_on_a_loaded_turn_the_incremental_scan_equals_a_scan_from_scratch(edits: list[tuple[int, bool]]) -> None:
    turn = _loaded()
    scan_anchors(turn, incremental=True)
    for i, clone in edits:
        EDITS[i](turn)
        if clone:
            turn = turn.clone()
        _same_result(scan_anchors(turn, incremental=True), _fresh(turn))
