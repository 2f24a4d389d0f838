"""The Gemini prefix guard is incremental like Claude's (``_prefix_guard.quick_check``): a request whose proven
contents did not change reads only the ones after them, an edit of an old block still makes the guard leave
the signatures after it out, and after any change the request is exactly what a whole pass on a copy that
remembers nothing makes."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geppetto import Block, Turn
from geppetto.providers._prefix_guard import REASONING_PREFIX, TURN_META_PREFIX_GUARD, Progress, proven
from geppetto.providers.gemini import _binding, build_contents, build_request
from geppetto.providers.gemini._binding import _head, record_response
from geppetto.turns import PAYLOAD_THOUGHT_SIGNATURE

MODEL = "gemini-2.5-flash"


def _request(turn: Turn, policy: str | None = "drop") -> dict[str, Any]:
    return build_request(turn, tools=[], thinking_budget=-1, model=MODEL, prefix_policy=policy)


def _step(turn: Turn, i: int) -> dict[str, Any]:
    """One tool-loop step as the engine runs it: the guarded request, the response stamped, the result."""
    body = _request(turn)
    start = len(turn.blocks)
    thought = Block.reasoning(f"think {i}")
    thought.payload[PAYLOAD_THOUGHT_SIGNATURE] = f"sig{i}"
    turn.append(thought)
    turn.append(Block.tool_call(f"t{i}", "f", {"i": i}))
    origin: dict[int, Block] = {}
    _, contents = build_contents(turn, origin=origin)
    record_response(turn, body, turn.blocks[start:], contents, origin)
    turn.append(Block.tool_use(f"t{i}", f"result {i}"))
    return body


def _loop(steps: int) -> Turn:
    turn = Turn()
    turn.append(Block.system("be brief"))
    turn.append(Block.user("go"))
    for i in range(steps):
        _step(turn, i)
    return turn


def _plain(turn: Turn) -> Turn:
    """A copy that remembers nothing: its guard makes a whole pass."""
    return Turn(blocks=[copy.deepcopy(b) for b in turn.blocks], data=copy.deepcopy(turn.data))


def _signatures(body: dict[str, Any]) -> list[str]:
    return [p["thoughtSignature"] for c in body["contents"] for p in c["parts"] if "thoughtSignature" in p]


def test_an_unchanged_prefix_reads_only_the_new_contents(monkeypatch: pytest.MonkeyPatch) -> None:
    turn = _loop(30)
    _step(turn, 30)
    read: list[int] = []
    real = _binding._units

    def counted(contents: list[dict[str, Any]], origin: dict[int, Block]) -> Any:
        read.append(sum(len(c["parts"]) for c in contents))
        return real(contents, origin)

    monkeypatch.setattr(_binding, "_units", counted)
    body = _request(turn)
    progress = proven(turn, _head(body))
    assert isinstance(progress, Progress) and progress.messages == len(body["contents"]) - 1
    assert read and max(read) <= 4  # the last proven content's successor
    assert len(_signatures(body)) == 31  # every signature goes out
    assert body == _request(_plain(turn))  # the same request a whole pass makes


def test_an_edited_old_block_after_a_quick_pass_drops_the_signatures_after_it() -> None:
    turn = _loop(6)
    _request(turn)  # a quick pass: the progress covers every content but the last
    assert proven(turn, _head(_request(turn))) is not None
    next(b for b in turn.blocks if b.kind.value == "tool_use").payload["result"] = "edited"  # the first result
    body = _request(turn)
    assert _signatures(body) == ["sig0"]  # made before the edit: still good; the five after it are left out
    report = TURN_META_PREFIX_GUARD.get(turn.metadata)
    assert report is not None and report["dropped"] == 5
    assert body == _request(_plain(turn))


def test_an_edited_digest_is_caught_by_a_whole_pass() -> None:
    turn = _loop(6)
    _request(turn)
    block = [b for b in turn.blocks if b.kind.value == "reasoning"][2]
    REASONING_PREFIX.set(block.metadata, {"head": "x", "prefix": "y"})  # a watched key: the watch sees it
    body = _request(turn)
    assert _signatures(body) == ["sig0", "sig1"]  # the block is left out, so every later one is judged without it
    assert body == _request(_plain(turn))


def _edit_result(turn: Turn) -> None:
    next(b for b in turn.blocks if b.kind.value == "tool_use").payload["result"] = "edited"


def _edit_thought(turn: Turn) -> None:
    next(b for b in turn.blocks if b.kind.value == "reasoning").payload["text"] = "edited"


def _edit_system(turn: Turn) -> None:
    turn.blocks[0].payload["text"] = "be verbose"


def _remove_call(turn: Turn) -> None:
    del turn.blocks[3]


def _replace_user(turn: Turn) -> None:
    turn.blocks[1] = Block.user("went")


def _clone(turn: Turn) -> None:
    turn.blocks = turn.clone().blocks


EDITS: list[Callable[[Turn], None]] = [_edit_result, _edit_thought, _edit_system, _remove_call, _replace_user, _clone]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(range(len(EDITS))), st.integers(0, 2)), max_size=4))
def test_after_any_change_the_request_is_a_whole_passes(edits: list[tuple[int, int]]) -> None:
    turn = _loop(6)
    step = 6
    for edit, steps in edits:
        EDITS[edit](turn)
        expected = _request(_plain(turn))  # first: the copy drops what is stale now, as the guarded request does
        assert _request(turn) == expected
        for _ in range(steps):
            _step(turn, step)
            step += 1
            assert _request(turn) == _request(_plain(turn))


def test_the_unguarded_request_keeps_nothing() -> None:
    turn = _loop(3)
    turn.blocks.watch = None
    _request(turn, None)
    assert turn.blocks.watch is None
