"""The shared prefix guard on synthetic requests: stamping, checking, the cascade, each policy's report."""

from __future__ import annotations

import pytest

from geppetto import Block, ConfigurationError, PrefixChangedError, Turn
from geppetto.providers._prefix_guard import (
    REASONING_STALE,
    TURN_META_PREFIX_GUARD,
    Unit,
    apply_policy,
    check,
    check_policy,
    guard_metrics,
    stamp,
)
from geppetto.turns import BLOCK_META_MIDDLEWARE


def _request(*texts: str) -> tuple[list[Unit], list[Block]]:
    """Units for ``texts``; a text starting with ``r`` is replayed reasoning."""
    blocks = [Block.reasoning(t) if t.startswith("r") else Block.user(t) for t in texts]
    return [Unit(t.encode(), b, t.startswith("r")) for t, b in zip(texts, blocks, strict=True)], blocks


def test_an_unchanged_prefix_is_proven_and_a_changed_one_is_caught_with_the_cascade() -> None:
    units, blocks = _request("u1", "r1", "u2", "r2")
    assert stamp(units, "head", blocks) == 2
    assert check(units, "head") == []
    edited = [Unit(b"u1 edited", blocks[0]), *units[1:]]
    BLOCK_META_MIDDLEWARE.set(blocks[0].metadata, "redactor")
    stale = check(edited, "head")
    assert [(s.index, s.changed_by, s.header_changed) for s in stale] == [
        (1, "redactor", False),
        (3, "redactor", False),
    ]
    later = [*units[:2], Unit(b"u2 edited", blocks[2]), units[3]]  # only what follows the change is stale
    assert [s.index for s in check(later, "head")] == [3]
    header = check(units, "other head")
    assert header[0].changed_block == "the system prompt or the tool list" and header[0].header_changed


def test_a_block_without_a_digest_is_replayed_as_it_is() -> None:
    units, _ = _request("u1", "r1")
    assert check([Unit(b"changed", units[0].block), units[1]], "") == []


def test_policies_report_mark_and_raise() -> None:
    guard_metrics.reset()
    units, blocks = _request("u1", "r1")
    stamp(units, "", blocks)
    changed = [Unit(b"u0", blocks[0]), units[1]]
    turn = Turn()
    with pytest.raises(PrefixChangedError, match=r"reasoning block .* pass prefix_policy='drop'"):
        apply_policy(turn, "anthropic", "m", "error", check(changed, ""), changed)
    assert not REASONING_STALE.get(blocks[1].metadata) and guard_metrics.snapshot()["errors"] == {"anthropic": 1}
    apply_policy(turn, "anthropic", "m", "drop", check(changed, ""), changed)
    assert REASONING_STALE.get(blocks[1].metadata) is True
    report = TURN_META_PREFIX_GUARD.require(turn.metadata)
    assert (report["policy"], report["dropped"], report["dropped_bytes"], report["blocks"]) == (
        "drop",
        1,
        2,
        [blocks[1].id],
    )
    apply_policy(turn, "anthropic", "m", "drop", [], changed)  # nothing stale: the report goes
    assert TURN_META_PREFIX_GUARD.get(turn.metadata) is None


def test_an_unknown_policy_names_the_choices() -> None:
    with pytest.raises(ConfigurationError, match="prefix_policy='keep': use one of 'drop', 'rewrite', 'error'"):
        check_policy("keep")
