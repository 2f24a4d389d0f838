"""The seed's anchor scenarios (findBestAnchor 1-6, isValidAnchor 1-4, getBlocksAfterResponse 1-4) and the
fingerprint proof: edits, removals, insertions and reorders before an anchor are caught."""

from __future__ import annotations

import pytest

from geppetto.providers.openai_responses import blocks_after_response, find_best_anchor, is_valid_anchor
from geppetto.providers.openai_responses._answer import tag_blocks
from geppetto.providers.openai_responses._request import scan_anchors
from geppetto.turns import BLOCK_META_RESPONSE_ID, Block, Turn


def build(*spec: Block | tuple[str, Block]) -> Turn:
    """A Turn whose ``(response_id, block)`` entries are tagged as the engine tags them when they arrive:
    consecutive entries of one response id are that response's blocks."""
    turn = Turn()
    start, current = 0, None
    for entry in (*spec, None):
        rid = entry[0] if isinstance(entry, tuple) else None
        if current is not None and rid != current:
            tag_blocks(turn, start, current)
        if rid is not None and rid != current:
            start = len(turn.blocks)
        current = rid
        if isinstance(entry, tuple):
            turn.append(entry[1])
        elif entry is not None:
            turn.append(entry)
    return turn


def llm(text: str = "hi") -> Block:
    return Block.llm_text(text)


def call(cid: str = "call_1") -> Block:
    return Block.tool_call(cid, "get_weather", {"city": "Paris"})


def use(cid: str = "call_1") -> Block:
    return Block.tool_use(cid, "sunny")


def test_find_best_anchor_1_empty_turn() -> None:
    assert find_best_anchor(Turn()) is None


def test_find_best_anchor_2_single_response() -> None:
    turn = build(Block.user("q"), ("resp_A", llm()), ("resp_A", call()))
    assert find_best_anchor(turn) == "resp_A"


def test_find_best_anchor_3_middleware_appended() -> None:
    turn = build(Block.user("q"), ("resp_A", llm()), ("resp_A", call()), use())
    assert find_best_anchor(turn) == "resp_A"


def test_find_best_anchor_4_multiple_responses_latest_wins() -> None:
    turn = build(Block.user("q"), ("resp_A", llm()), use(), ("resp_B", llm("b")))
    assert find_best_anchor(turn) == "resp_B"


def test_find_best_anchor_5_middleware_inserted_in_middle() -> None:
    turn = build(Block.user("q"), ("resp_A", llm()), ("resp_A", call()))
    turn.insert(2, Block.user("INJECTED"))
    assert find_best_anchor(turn) is None


def test_find_best_anchor_6_all_middleware_blocks() -> None:
    turn = build(Block.user("q"), Block.system("s"), use())
    assert find_best_anchor(turn) is None


def test_is_valid_anchor_1_contiguous() -> None:
    assert is_valid_anchor(build(Block.user("q"), ("resp_A", llm()), ("resp_A", call())), "resp_A") is True


def test_is_valid_anchor_2_gap() -> None:
    turn = build(("resp_A", llm()), ("resp_A", llm("2")))
    turn.insert(1, Block.user("OTHER"))
    assert is_valid_anchor(turn, "resp_A") is False


def test_is_valid_anchor_3_unknown_id() -> None:
    assert is_valid_anchor(build(("resp_A", llm())), "resp_B") is False


def test_is_valid_anchor_4_single_block() -> None:
    assert is_valid_anchor(build(("resp_A", llm())), "resp_A") is True


def test_blocks_after_1_blocks_after_anchor() -> None:
    turn = build(Block.user("q"), ("resp_A", llm()), use(), Block.user("q2"))
    assert blocks_after_response(turn, "resp_A") == turn.blocks[2:]


def test_blocks_after_2_none_after() -> None:
    assert blocks_after_response(build(Block.user("q"), ("resp_A", llm())), "resp_A") == []


def test_blocks_after_3_anchor_not_found() -> None:
    assert blocks_after_response(build(Block.user("q"), ("resp_A", llm())), "resp_B") == []


def test_blocks_after_4_only_after_last_occurrence() -> None:
    turn = build(("resp_A", llm()), ("resp_A", call()), use())
    assert blocks_after_response(turn, "resp_A") == [turn.blocks[2]]


def _chain() -> Turn:
    return build(
        Block.system("be terse"),
        Block.user("q"),
        ("resp_A", call("c1")),
        use("c1"),
        ("resp_B", llm("answer")),
        Block.user("q2"),
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("none", "resp_B"),
        ("edit_system", None),
        ("edit_user", None),
        ("remove_user", None),
        ("insert_head", None),
        ("edit_tool_result", "resp_A"),
        ("reorder_head", None),
        ("edit_after_anchor", "resp_B"),
        ("remove_last_response", "resp_A"),
    ],
)
def test_changes_before_an_anchor_are_caught(change: str, expected: str | None) -> None:
    turn = _chain()
    b = turn.blocks
    if change == "edit_system":
        b[0].payload["text"] = "be verbose"
    elif change == "edit_user":
        b[1].payload["text"] = "other question"
    elif change == "remove_user":
        del b[1]
    elif change == "insert_head":
        turn.insert(0, Block.user("new"))
    elif change == "edit_tool_result":
        b[3].payload["result"] = "rainy"
    elif change == "reorder_head":
        b[0], b[1] = b[1], b[0]
    elif change == "edit_after_anchor":
        b[5].payload["text"] = "changed q2"
    elif change == "remove_last_response":
        del b[4]
    assert find_best_anchor(turn) == expected


def test_block_without_fingerprint_is_not_an_anchor() -> None:
    turn = Turn()
    block = turn.append(llm())
    BLOCK_META_RESPONSE_ID.set(block.metadata, "resp_X")
    assert (find_best_anchor(turn), is_valid_anchor(turn, "resp_X")) == (None, False)


def test_instructions_mode_ignores_system_edits() -> None:
    turn = Turn()
    turn.append(Block.system("v1"))
    turn.append(Block.user("q"))
    turn.append(llm())
    tag_blocks(turn, 2, "resp_A", include_system=False)
    turn.blocks[0].payload["text"] = "v2"
    assert (find_best_anchor(turn, include_system=False), find_best_anchor(turn)) == ("resp_A", None)


def reasoning(item_id: str = "rs_1") -> Block:
    return Block.reasoning(item_id=item_id, encrypted_content="gAAAA-sealed")


def _multi() -> Turn:
    """resp_A answered with text, a tool call and the result came back; resp_B with reasoning + text."""
    return build(
        Block.user("q"),
        ("resp_A", llm("let me check")),
        ("resp_A", call("c1")),
        use("c1"),
        ("resp_B", reasoning()),
        ("resp_B", llm("done")),
    )


@pytest.mark.parametrize(
    ("drop", "expected"),
    [
        ([], "resp_B"),
        ([5], "resp_A"),  # resp_B's message (its last block): resp_B no longer ends where it ended
        ([4], "resp_A"),  # resp_B's reasoning (its first block)
        ([2, 3], None),  # resp_A's tool call and its result: resp_A's tail is gone, and resp_B's prefix changed
    ],
)
def test_a_response_missing_any_of_its_blocks_is_not_an_anchor(drop: list[int], expected: str | None) -> None:
    turn = _multi()
    for i in sorted(drop, reverse=True):
        del turn.blocks[i]
    assert find_best_anchor(turn) == expected


def test_dropping_the_tail_of_the_only_response_leaves_no_anchor() -> None:
    turn = build(Block.user("q"), ("resp_A", llm("let me check")), ("resp_A", call("c1")))
    del turn.blocks[2]
    turn.append(Block.user("never mind"))
    assert (find_best_anchor(turn), is_valid_anchor(turn, "resp_A")) == (None, False)


def test_parallel_calls_missing_the_last_one_are_not_an_anchor() -> None:
    turn = build(Block.user("q"), ("resp_A", call("c1")), ("resp_A", call("c2")), use("c1"), use("c2"))
    assert find_best_anchor(turn) == "resp_A"
    del turn.blocks[4], turn.blocks[2]
    assert find_best_anchor(turn) is None


def test_a_duplicated_block_of_a_response_is_caught() -> None:
    turn = build(Block.user("q"), ("resp_A", llm("a")), ("resp_A", call("c1")))
    turn.insert(2, turn.blocks[1].copy())
    assert find_best_anchor(turn) is None


def test_every_block_of_a_response_records_its_count_and_the_fingerprint_at_its_end() -> None:
    turn = _multi()
    a = [b.metadata for b in turn.blocks[1:3]]
    assert [m["openai.response_blocks@v1"] for m in a] == [2, 2]
    assert a[0]["geppetto.prefix_fingerprint@v1"] == a[1]["geppetto.prefix_fingerprint@v1"]


def test_a_response_marked_not_anchorable_is_never_an_anchor() -> None:
    turn = Turn()
    turn.append(Block.user("q"))
    turn.append(llm("partial"))
    tag_blocks(turn, 1, "resp_A", refused="incomplete function call call_9")
    assert (find_best_anchor(turn), scan_anchors(turn).reason_code()) == (None, "not_anchorable")


def test_reason_codes_name_what_broke_the_latest_response() -> None:
    turn = _multi()
    del turn.blocks[5]
    assert scan_anchors(turn).reason_code() == "response_incomplete"
    turn = _multi()
    turn.insert(5, Block.user("x"))
    assert scan_anchors(turn).reason_code() == "not_contiguous"
    turn = _multi()
    turn.blocks[0].payload["text"] = "edited"
    assert scan_anchors(turn).reason_code() == "fingerprint_mismatch"
