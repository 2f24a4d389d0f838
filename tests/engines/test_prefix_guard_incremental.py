"""The Claude prefix guard is incremental (``_prefix_guard.Progress``): a request whose proven messages did not
change reads only the ones after them, and after any change (an edited block, a moved one, a new system prompt,
an edited digest) the request is exactly what a whole pass on a copy that remembers nothing makes."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geppetto import Block, Turn
from geppetto.providers._prefix_guard import REASONING_PREFIX, Progress, proven
from geppetto.providers.anthropic import _binding, build_messages, build_request
from geppetto.providers.anthropic._binding import head_of, record_response
from geppetto.turns import BLOCK_META_PROVIDER

MODEL = "claude-sonnet-4-5"


def _request(turn: Turn, policy: str | None = "drop") -> dict[str, Any]:
    return build_request(turn, model=MODEL, tools=[], thinking_budget=1024, prefix_policy=policy)


def _step(turn: Turn, i: int) -> dict[str, Any]:
    """One tool-loop step as the engine runs it: the guarded request, the response stamped, the result."""
    body = _request(turn)
    start = len(turn.blocks)
    for block in (Block.reasoning(f"think {i}", signature=f"sig{i}"), Block.tool_call(f"t{i}", "f", {"i": i})):
        BLOCK_META_PROVIDER.set(block.metadata, "anthropic")
        turn.append(block)
    origin: dict[int, Block] = {}
    record_response(turn, body, turn.blocks[start:], build_messages(turn, origin), origin, policy="drop")
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


def _parts(body: dict[str, Any]) -> list[Any]:
    return [c for m in body["messages"] for c in m["content"]]


def test_an_unchanged_prefix_reads_only_the_new_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    turn = _loop(30)
    _step(turn, 30)
    read: list[int] = []
    real = _binding.units_of

    def counted(messages: list[dict[str, Any]], origin: dict[int, Block]) -> Any:
        read.append(sum(len(m["content"]) for m in messages))
        return real(messages, origin)

    monkeypatch.setattr(_binding, "units_of", counted)
    body = _request(turn)
    progress = proven(turn, head_of(body))
    assert isinstance(progress, Progress) and progress.messages == len(body["messages"]) - 1
    assert read and max(read) <= 4  # the last proven message's successor: one user and one assistant message
    assert len(_parts(body)) > 90
    assert body == _request(_plain(turn))  # the same request a whole pass makes
    assert body["thinking"]["block_binding"] == {"prefix_mismatch_behavior": "drop_block"}


def _edit_result(turn: Turn) -> None:
    next(b for b in turn.blocks if b.kind.value == "tool_use").payload["result"] = "edited"


def _edit_thinking(turn: Turn) -> None:
    next(b for b in turn.blocks if b.kind.value == "reasoning").payload["text"] = "edited"


def _edit_system(turn: Turn) -> None:
    turn.blocks[0].payload["text"] = "be verbose"


def _remove_call(turn: Turn) -> None:
    del turn.blocks[4]


def _edit_digest(turn: Turn) -> None:
    block = [b for b in turn.blocks if b.kind.value == "reasoning"][3]
    REASONING_PREFIX.set(block.metadata, {"head": "x", "prefix": "y"})


def _replace_user(turn: Turn) -> None:
    turn.blocks[1] = Block.user("went")


def _clone(turn: Turn) -> None:
    clone = turn.clone()
    turn.blocks = clone.blocks


EDITS: list[Callable[[Turn], None]] = [
    _edit_result,
    _edit_thinking,
    _edit_system,
    _remove_call,
    _edit_digest,
    _replace_user,
    _clone,
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(range(len(EDITS))), st.integers(0, 2)), max_size=5))
def test_after_any_change_the_request_is_a_whole_passes(edits: list[tuple[int, int]]) -> None:
    turn = _loop(8)
    step = 8
    for edit, steps in edits:
        EDITS[edit](turn)
        expected = _request(_plain(turn))
        assert _request(turn) == expected
        for _ in range(steps):
            _step(turn, step)
            step += 1
            assert _request(turn) == _request(_plain(turn))


def test_a_stale_block_found_makes_a_whole_pass_naming_the_culprit() -> None:
    turn = _loop(6)
    _request(turn)
    assert proven(turn, head_of(_request(turn))) is not None
    _edit_result(turn)
    body = _request(turn)
    assert len([p for p in _parts(body) if p.get("type") == "thinking"]) < 6  # the thinking after it dropped
    assert body == _request(_plain(turn))


def test_the_unguarded_request_keeps_nothing() -> None:
    turn = _loop(3)
    turn.blocks.watch = None
    _request(turn, None)
    assert turn.blocks.watch is None
