"""A store's per-session summary measures each saved snapshot from the last measure that still holds
(geppetto.session._sizes): over any derivations (appends, edits, inserts, removals, reasoning pairs that
depend on the block after them), its totals equal those measured from every block."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from geppetto.providers.openai_responses._answer import item_to_block
from geppetto.session import RecordedEvent
from geppetto.session._requests import inference_totals
from geppetto.turns import BLOCK_META_RESPONSE_ID, PAYLOAD_ENCRYPTED_CONTENT, PAYLOAD_ITEM_ID, Block
from geppetto.turns._cow import Frozen, freeze


def _response(rid: str, n: int, reasoning: bool) -> list[Block]:
    out: list[Block] = []
    if reasoning:
        r = Block.reasoning("")
        r.payload[PAYLOAD_ITEM_ID] = f"rs_{rid}"
        r.payload[PAYLOAD_ENCRYPTED_CONTENT] = "x" * n
        out.append(r)
    a = Block.llm_text(f"answer {rid} " + "y" * n)
    a.payload[PAYLOAD_ITEM_ID] = f"msg_{rid}"
    out.append(a)
    for b in out:
        BLOCK_META_RESPONSE_ID.set(b.metadata, rid)
    return out


def _final(rid: str, anchor: str | None, full: bool, sent: list[str] | None) -> RecordedEvent:
    extra: dict[str, Any] = {"response_id": rid, "responses.mode": "chained" if anchor else "stateless"}
    extra.update({"responses.anchor": anchor, "responses.full": full})
    if sent is not None:
        extra["responses.sent"] = sent
    return RecordedEvent("inf", 0, 0.0, "final", {"metadata": {"provider": "openai", "extra": extra}})


STEPS = st.lists(
    st.tuples(
        st.sampled_from(["prompt", "prompt", "prompt", "edit", "insert", "remove", "retag", "bare", "bare", "nosave"]),
        st.integers(0, 40),
        st.booleans(),
        st.sampled_from(["ids", "full", "old"]),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(steps=STEPS)
def test_the_measured_totals_equal_those_of_every_block(steps: list[tuple[str, int, bool, str]]) -> None:
    saved: Frozen | None = None
    lazy: list[Block] = []
    last_rid: str | None = None
    for k, (op, n, reasoning, how) in enumerate(steps):
        lazy = saved.lazy() if saved is not None else []
        if op == "edit" and lazy:
            lazy[n % len(lazy)].payload["text"] = f"edited {k}"
        elif op == "insert":
            lazy.insert(n % (len(lazy) + 1), Block.user(f"inserted {k}"))
        elif op == "remove" and lazy:
            del lazy[n % len(lazy)]
        elif op == "retag" and len(lazy) > 1:  # a block joins the response before it (pairs with its reasoning)
            i = 1 + n % (len(lazy) - 1)
            BLOCK_META_RESPONSE_ID.set(lazy[i].metadata, BLOCK_META_RESPONSE_ID.get(lazy[i - 1].metadata) or "")
            lazy[i].payload[PAYLOAD_ITEM_ID] = f"item_{k}"
        rid = f"resp_{k}"
        if op != "bare":  # a bare step: a response straight after the last, its own reasoning alone
            lazy.append(Block.user(f"prompt {k}"))
        before = len(lazy)
        parent = saved
        if op == "nosave":  # a snapshot between two saves, as a Session's seed is
            parent = freeze(lazy, saved)
            lazy = parent.lazy()
        lazy.extend(_response(rid, n, reasoning)[: 1 if op == "bare" else None])
        derived = freeze(lazy, parent)
        full = how == "full" or last_rid is None or before == 0
        sent = None if how == "old" else [b.id for b in lazy[:before]] if full else [lazy[before - 1].id]
        events = [_final(rid, None if full else last_rid, full, sent)]
        expected = inference_totals(list(derived.blocks), events)
        assert inference_totals(derived, events) == expected
        saved, last_rid = derived, rid


def test_a_measure_never_ends_on_reasoning_whose_pairing_a_later_block_may_change() -> None:
    """The measure kept for later snapshots stops before a trailing reasoning block: were the next block to
    join its response later, the reasoning would then go as an item of its own."""
    first = [Block.user("p"), *_response("r1", 3, False), *_response("r2", 3, True)[:1]]
    saved = freeze(first, None)
    assert inference_totals(saved, [_final("r2", None, True, None)])["stateless_bytes"] > 0
    lazy = saved.lazy()
    lazy.extend(_response("r3", 3, False))
    second = freeze(lazy, saved)
    inference_totals(second, [_final("r3", "r2", False, [])])
    assert second.memo is not None and second.blocks[second.memo["items"][0] - 1].kind.value != "reasoning"
    lazy = second.lazy()
    BLOCK_META_RESPONSE_ID.set(lazy[3].metadata, "r2")  # r3's answer now pairs with r2's reasoning
    lazy.extend(_response("r4", 3, False))
    third = freeze(lazy, second)
    events = [_final("r4", None, True, None)]
    assert inference_totals(third, events) == inference_totals(list(third.blocks), events)


def test_a_measure_never_ends_inside_a_response_whose_reasoning_a_later_message_may_follow() -> None:
    """Reasoning, then a hosted call of its response: an annotated message of that response put after the
    call later goes with its id (its response's reasoning went), so the measure kept for later snapshots
    stops before the reasoning, not after the call."""
    reasoning = Block.reasoning("")
    reasoning.payload[PAYLOAD_ITEM_ID] = "rs_r1"
    reasoning.payload[PAYLOAD_ENCRYPTED_CONTENT] = "x" * 8
    call = item_to_block({"type": "code_interpreter_call", "id": "ci_r1", "status": "completed", "code": "1"})
    assert call is not None
    for b in (reasoning, call):
        BLOCK_META_RESPONSE_ID.set(b.metadata, "r1")
    saved = freeze([Block.user("p"), reasoning, call, *_response("r2", 3, False)], None)
    inference_totals(saved, [_final("r2", None, True, None)])
    assert saved.memo is not None and saved.memo["items"][0] == 1
    lazy = saved.lazy()
    message = Block.llm_text("see plot")
    message.payload[PAYLOAD_ITEM_ID] = "msg_r1"
    message.payload["content"] = [{"type": "output_text", "text": "see plot", "annotations": [{"type": "file_path"}]}]
    BLOCK_META_RESPONSE_ID.set(message.metadata, "r1")
    lazy.insert(3, message)
    lazy.extend(_response("r3", 3, False))
    derived = freeze(lazy, saved)
    events = [_final("r3", None, True, None)]
    assert inference_totals(derived, events) == inference_totals(list(derived.blocks), events)
