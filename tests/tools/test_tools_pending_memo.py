"""``pending_tool_calls`` on snapshots derived from snapshots (a Session's history): the calls it finds
from a snapshot's remembered open calls plus what was added equal a plain scan of every block, whatever
was appended, patched, removed or reordered between snapshots; and it copies no block to find them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from geppetto.tools import pending_tool_calls
from geppetto.turns import Block, BlockKind, Turn
from geppetto.turns._cow import Frozen, freeze


def _reference(blocks: list[Block]) -> list[str]:
    """The open calls by a forward scan, as block ids (the documented positional matching)."""
    open_calls: dict[str, list[int]] = {}
    for i, b in enumerate(blocks):
        if b.kind is BlockKind.TOOL_CALL:
            open_calls.setdefault(b.payload["id"], []).append(i)
        elif b.kind is BlockKind.TOOL_USE and open_calls.get(b.payload["id"]):
            open_calls[b.payload["id"]].pop(0)
    return [blocks[i].id for i in sorted(i for v in open_calls.values() for i in v)]


def _block(kind: str, call: int) -> Block:
    if kind == "call":
        return Block.tool_call(f"c{call}", "f", {})
    if kind == "use":
        return Block.tool_use(f"c{call}", "ok")
    return Block.user(f"text {call}")


KINDS = st.sampled_from(["call", "use", "text"])
STEP = st.one_of(
    st.tuples(st.just("append"), st.lists(st.tuples(KINDS, st.integers(0, 3)), min_size=1, max_size=4)),
    st.tuples(st.just("patch"), st.tuples(KINDS, st.integers(0, 3))),
    st.tuples(st.just("remove"), st.integers(0, 50)),
    st.tuples(st.just("swap"), st.integers(0, 50)),
    st.tuples(st.just("read"), st.integers(0, 50)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=12))
def test_pending_calls_from_remembered_snapshots_equal_a_plain_scan(steps: list[tuple[str, object]]) -> None:
    frozen: Frozen | None = None
    for op, arg in steps:
        turn = Turn(blocks=frozen.lazy()) if frozen is not None else Turn()
        blocks = turn.blocks
        if op == "append":
            for kind, call in arg:  # type: ignore[union-attr]
                turn.append(_block(kind, call))
        elif blocks and op == "patch":
            kind, call = arg  # type: ignore[misc]
            blocks[len(blocks) // 2] = _block(kind, call)
        elif blocks and op == "remove":
            del blocks[int(arg) % len(blocks)]  # type: ignore[call-overload]
        elif len(blocks) > 1 and op == "swap":
            i = int(arg) % (len(blocks) - 1)  # type: ignore[call-overload]
            blocks[i], blocks[i + 1] = blocks[i + 1], blocks[i]
        elif blocks and op == "read":
            _ = blocks[int(arg) % len(blocks)]  # type: ignore[call-overload]
        assert [b.id for b in pending_tool_calls(turn)] == _reference(list(turn.blocks))
        frozen = freeze(turn.blocks, frozen)
        again = Turn(blocks=frozen.lazy())
        assert [b.id for b in pending_tool_calls(again)] == _reference(list(Turn(blocks=frozen.lazy()).blocks))


def test_finding_pending_calls_copies_no_block() -> None:
    turn = Turn()
    for i in range(50):
        turn.append(Block.user(f"q{i}"))
        turn.append(Block.tool_call(f"c{i}", "f", {}))
        turn.append(Block.tool_use(f"c{i}", "ok"))
    turn.append(Block.tool_call("open", "f", {}))
    snapshot = Turn(blocks=freeze(turn.blocks, None).lazy())
    assert [b.payload["id"] for b in pending_tool_calls(snapshot)] == ["open"]
    assert snapshot.blocks.touched == {150}  # only the open call was read (copied), to be returned
