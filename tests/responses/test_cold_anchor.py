"""The cold anchor check (issue 36): on a Turn whose blocks are still the frozen versions a store loaded
(a resumed session), the scan reads them in place, without copying them, and remembers their wire form on
them; the proof still catches any change made afterwards, since a read of a proven frozen block gets a
copy sealed for the proof."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_anchor_memo import EDITS, _fresh, _respond, _same_result, _turn

from geppetto.providers.openai_responses._request import find_best_anchor, is_valid_anchor, scan_anchors
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


def test_find_best_anchor_reads_a_loaded_turn_in_place_and_keeps_nothing() -> None:
    """The public functions on a Turn just loaded: the stored versions are read where they are (no copy per
    block), nothing is sealed or kept with the Turn, and the answer is the full scan's."""
    turn = _loaded()
    blocks = turn.blocks
    assert find_best_anchor(turn) == _fresh(_turn()).best() == "resp_2"
    assert is_valid_anchor(turn, "resp_2") and not is_valid_anchor(turn, "resp_9")
    assert all(type(list.__getitem__(blocks, i)) is FrozenBlock for i in range(len(blocks)))  # none copied
    assert blocks.watch is None  # no proof left behind by a reader outside the engine
    turn.blocks[1].payload["text"] = "edited"  # a read copies the block: the next scan sees the edit
    assert find_best_anchor(turn) is None


def test_find_best_anchor_extends_the_engines_proof() -> None:
    """On a Turn the engine proved, the public function reads only the blocks added since, as the engine's
    next request does, and stays exact after an edit."""
    turn = _loaded()
    scan_anchors(turn, incremental=True)  # the engine's request
    _respond(turn)
    watch = turn.blocks.watch
    assert watch is not None
    proven = watch.k
    assert find_best_anchor(turn) == "resp_5"
    assert watch.k == len(turn.blocks) > proven  # the proof went on from where the engine left it
    assert scan_anchors(turn, incremental=True).hashed == 0  # and the engine's next scan reads nothing again
    turn.blocks[2].payload["args"]["city"] = "Rome"
    assert find_best_anchor(turn) is None and _fresh(turn).best() is None
    assert not is_valid_anchor(turn, "resp_2")


def test_find_best_anchor_leaves_a_proof_under_another_seed_alone() -> None:
    """A proof the engine made under another seed (a conversation) is not replaced by the public scan."""
    turn = _loaded()
    engine = scan_anchors(turn, seed="conversation:conv_1", incremental=True)
    watch = turn.blocks.watch
    assert engine.best() is None and watch is not None  # its fingerprints were made in no conversation
    state = watch.state
    assert find_best_anchor(turn) == "resp_2"  # judged under the Turn's own seed, in a pass of its own
    assert turn.blocks.watch is watch and watch.state is state
