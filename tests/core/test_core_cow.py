"""Copy on write (geppetto.turns._cow): a list over frozen versions behaves as a list of private copies under
every list operation, never changes the versions it shares, and freezing it again shares what did not change."""

from __future__ import annotations

import copy
import pickle
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from geppetto.turns import Block, Turn, turn_to_dict
from geppetto.turns._cow import FrozenBlock, LazyBlockList, freeze


def _blocks(n: int) -> list[Block]:
    return [Block.user(f"u{i}", [{"url": f"x{i}"}]) if i % 2 else Block.llm_text(f"a{i}") for i in range(n)]


def _dicts(blocks: Any) -> list[dict[str, Any]]:
    turn = Turn()
    turn.blocks = list(blocks)
    return turn_to_dict(turn)["blocks"]  # type: ignore[no-any-return]


OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["get", "set", "del", "insert", "pop", "remove", "reverse", "sort", "slice", "edit", "append", "clear",
             "delslice", "imul", "index", "contains"]
        ),
        st.integers(0, 50),
    ),
    max_size=12,
)  # fmt: skip


def _apply(lst: list[Block], op: str, n: int, fresh: Block) -> Any:
    size = len(lst)
    i = n % size if size else 0
    if op == "append" or not size:
        lst.append(fresh)
    elif op == "get":
        return lst[i].text
    elif op == "set":
        lst[i] = fresh
    elif op == "del":
        del lst[i]
    elif op == "insert":
        lst.insert(i, fresh)
    elif op == "pop":
        return lst.pop(i).text
    elif op == "remove":
        lst.remove(lst[i])
    elif op == "reverse":
        lst.reverse()
    elif op == "sort":
        lst.sort(key=lambda b: b.text)
    elif op == "slice":
        return [b.text for b in lst[i:]]
    elif op == "edit":
        lst[i].payload["text"] = f"edited {n}"
    elif op == "clear":
        lst.clear()
    elif op == "delslice":
        del lst[i : i + 2]
    elif op == "imul":
        lst *= 1
    elif op == "index":
        return lst.index(lst[i])
    elif op == "contains":
        return lst[i] in lst
    return None


@given(size=st.integers(0, 8), ops=OPS)
def test_a_lazy_list_behaves_as_a_list_of_copies_and_never_edits_what_it_shares(
    size: int, ops: list[tuple[str, int]]
) -> None:
    source = _blocks(size)
    frozen = freeze(source, None)
    before = _dicts(frozen.blocks)
    lazy = frozen.lazy()
    plain = [b.copy() for b in source]
    for k, (op, n) in enumerate(ops):
        fresh = Block.llm_text(f"new {k}")
        assert _apply(lazy, op, n, fresh) == _apply(plain, op, n, _twin(fresh))
        assert _dicts(lazy) == _dicts(plain)
    assert _dicts(frozen.blocks) == before, "the shared versions never change"
    assert all(type(b) is not FrozenBlock for b in lazy), "nothing frozen is ever handed out"
    again = freeze(lazy, frozen)
    assert _dicts(again.blocks) == _dicts(plain)
    untouched = {i for i, b in enumerate(again.blocks) if i < len(frozen.blocks) and b is frozen.blocks[i]}
    assert all(_dicts([again.blocks[i]]) == _dicts([frozen.blocks[i]]) for i in untouched)


def _twin(block: Block) -> Block:
    """The same new block for the plain list (an equal copy with the same id)."""
    return block.copy()


def test_freezing_an_untouched_list_is_the_same_snapshot_and_reads_nothing() -> None:
    frozen = freeze(_blocks(5), None)
    lazy = frozen.lazy()
    assert freeze(lazy, frozen) is frozen
    lazy.append(Block.user("more"))
    grown = freeze(lazy, frozen)
    assert grown.parent is frozen and grown.keep == 5 and len(grown.tail) == 1
    assert all(grown.blocks[i] is frozen.blocks[i] for i in range(5))
    assert lazy.touched == set(), "appending read nothing"


def test_an_edit_read_through_the_list_is_a_new_version_only_there() -> None:
    frozen = freeze(_blocks(4), None)
    lazy = frozen.lazy()
    lazy[2].payload["text"] = "changed"
    lazy[1]
    after = freeze(lazy, frozen)
    assert list(after.patches) == [2]
    assert [after.blocks[i] is frozen.blocks[i] for i in range(4)] == [True, True, False, True]


def test_turns_over_lazy_lists_clone_copy_and_pickle_as_plain_data() -> None:
    frozen = freeze(_blocks(3), None)
    turn = Turn(frozen.lazy())
    clone = turn.clone()
    clone.blocks[0].payload["text"] = "only in the clone"
    assert turn.blocks[0].text == "a0"
    for other in (copy.deepcopy(turn), pickle.loads(pickle.dumps(turn))):
        assert other == turn and type(other.blocks[0]) is Block
    assert turn.blocks == [b.copy() for b in turn.blocks]
    assert isinstance(turn.blocks, LazyBlockList)


def test_a_settled_snapshot_holds_until_its_list_changes() -> None:
    from geppetto.turns._cow import settled

    base = freeze([Block.user(f"u{i}") for i in range(5)], None)
    blocks = base.lazy()
    blocks.append(Block.user("new"))
    frozen = freeze(blocks, base)
    assert settled(blocks, base, frozen)  # nothing changed: the same snapshot serves again
    blocks[-1].payload["text"] = "edited"  # the appended block is the caller's own object
    assert not settled(blocks, base, frozen)
    frozen = freeze(blocks, base)
    assert frozen.at(5).payload["text"] == "edited" and settled(blocks, base, frozen)
    blocks.append(Block.user("more"))
    assert not settled(blocks, base, frozen)
    frozen = freeze(blocks, base)
    assert blocks[0].text == "u0"  # a read copies the entry: it may be edited unseen from now on
    assert not settled(blocks, base, frozen)


def test_a_timeline_settles_an_unchanged_latest_once_and_sees_an_edit() -> None:
    from geppetto.session._history import Timeline

    timeline = Timeline()
    first = Turn()
    first.append(Block.user("hello"))
    timeline.push(first)
    root = timeline.settle_latest()
    assert root is not None
    seed = Turn(root.lazy())
    seed.append(Block.user("again"))
    timeline.push(seed)
    once = timeline.settle_latest()
    assert timeline.settle_latest() is once  # the second settle of an unchanged seed copies nothing
    seed.blocks[-1].payload["text"] = "changed"
    again = timeline.settle_latest()
    assert again is not once and again is not None and again.at(1).payload["text"] == "changed"
    assert timeline.entries[-1].frozen is again


def test_at_reads_a_dropped_snapshot_without_rebuilding_it() -> None:
    root = freeze([Block.user(f"u{i}") for i in range(4)], None)
    child_list = root.lazy()
    child_list.append(Block.user("c"))
    child = freeze(child_list, root)
    grand_list = child.lazy()
    grand_list[1] = Block.user("patched")
    grand_list.append(Block.user("g"))
    grand = freeze(grand_list, child)
    expected = [b.text for b in grand.blocks]
    grand.drop()
    child.drop()
    assert [grand.at(i).text for i in range(grand.size())] == expected
    assert not grand.whole and not child.whole


def test_rebase_makes_the_list_one_over_the_new_snapshot_in_place() -> None:
    from geppetto.turns._cow import rebase

    base = freeze([Block.user(f"u{i}") for i in range(6)], None)
    blocks = base.lazy()
    blocks[2].payload["text"] = "edited"  # read (copied), then changed
    assert blocks[4].text == "u4"  # read, unchanged
    blocks.append(Block.user("new"))
    frozen = freeze(blocks, base)
    assert rebase(blocks, frozen, None)
    assert all(list.__getitem__(blocks, i) is frozen.at(i) for i in range(len(blocks)))
    assert blocks.origin is frozen and not blocks.touched
    assert freeze(blocks, frozen) is frozen  # nothing read or added since: the same snapshot
    assert [b.text for b in blocks] == ["u0", "u1", "edited", "u3", "u4", "u5", "new"]
    blocks[0].payload["text"] = "later"  # a read copies again: the snapshot keeps its version
    assert frozen.at(0).payload["text"] == "u0"
    other = Turn()
    other.append(Block.user("x"))
    assert not rebase(other.blocks, frozen, None)  # not a list over a snapshot: left as it is
