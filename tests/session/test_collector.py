"""A session's history out of the garbage collector's passes (``geppetto.session._collector``): an output or a
restore freezes what the collector tracks, a full cycle (unfreeze, collect, freeze) reclaims frozen reference
cycles once the tracked objects doubled, and the switch (``freeze_collector``, ``GEPPETTO_GC_FREEZE=0``) and a
disabled collector leave the collector alone."""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import weakref
from collections.abc import Iterator

import pytest

import geppetto as gp
from geppetto import Block, Turn
from geppetto.session import MemoryTurnStore, _collector, freeze_collector


class Answer:
    async def run_inference(self, turn: Turn) -> Turn:
        turn.append(Block.llm_text("an answer"))
        return turn


class Cycle:
    """An object in a reference cycle: garbage only the cyclic collector frees."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    gc.unfreeze()
    enabled, frozen, mark = _collector._State.enabled, _collector._State.frozen, _collector._State.mark
    freeze_collector(True)
    yield
    _collector._State.enabled, _collector._State.frozen, _collector._State.mark = enabled, frozen, mark
    gc.unfreeze()


def _held_garbage() -> weakref.ref[Cycle]:
    """A cycle that is garbage once this returns, but frozen while it was alive."""
    cycle = Cycle()
    ref = weakref.ref(cycle)
    gc.freeze()
    del cycle
    return ref


def test_an_output_freezes_the_history() -> None:
    session = gp.Session(Answer(), store=MemoryTurnStore())
    asyncio.run(session.run("hello"))
    assert gc.get_freeze_count() > 0
    latest = session.latest
    assert latest is not None
    frozen_ids = {id(o) for o in gc.get_objects()}  # the tracked generations: the frozen one is not among them
    assert id(latest) not in frozen_ids and id(latest.blocks) not in frozen_ids


def test_a_restore_freezes_what_it_loaded() -> None:
    store = MemoryTurnStore()
    session = gp.Session(Answer(), store=store)
    asyncio.run(session.run("hello"))
    gc.unfreeze()
    restored = asyncio.run(gp.Session.restore(Answer(), store, session.session_id))
    assert restored.latest is not None
    assert id(restored.latest) not in {id(o) for o in gc.get_objects()}  # frozen


def test_frozen_cycles_are_reclaimed_once_the_tracked_objects_doubled() -> None:
    ref = _held_garbage()
    gc.collect()
    assert ref() is not None  # frozen: a collection does not see it
    _collector._State.frozen, _collector._State.mark = 10**9, _collector._seen()
    _collector.settle()
    assert ref() is not None  # far from doubled: freeze only
    _collector._State.frozen, _collector._State.mark = 0, _collector._seen() - _collector.MIN_GROWTH
    _collector.settle()
    assert ref() is None  # unfrozen, collected
    # frozen again, and the count recorded: frozen objects that other threads (the shared simulator's) free
    # meanwhile leave the permanent generation, so in a full test run the count can only have gone down a little
    frozen, now = _collector._State.frozen, gc.get_freeze_count()
    assert now > 0 and now <= frozen <= now * 1.01 + 100
    assert _collector._State.mark == _collector._seen()


def test_a_restore_never_runs_the_full_cycle() -> None:
    ref = _held_garbage()
    _collector._State.frozen, _collector._State.mark = 0, _collector._seen() - _collector.MIN_GROWTH
    _collector.settle(collect=False)
    gc.collect()
    assert ref() is not None  # still frozen: the next output's settle reclaims it
    _collector.settle()
    assert ref() is None


def test_turned_off_it_unfreezes_and_does_nothing() -> None:
    ref = _held_garbage()
    assert freeze_collector(False) is False
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert ref() is None
    session = gp.Session(Answer(), store=MemoryTurnStore())
    asyncio.run(session.run("hello"))
    assert gc.get_freeze_count() == 0
    assert freeze_collector() is False and freeze_collector(True) is True


def test_a_disabled_collector_is_left_to_the_application() -> None:
    gc.disable()
    try:
        session = gp.Session(Answer(), store=MemoryTurnStore())
        asyncio.run(session.run("hello"))
        assert gc.get_freeze_count() == 0
    finally:
        gc.enable()


@pytest.mark.parametrize(("value", "on"), [("0", False), ("off", False), ("1", True), ("", True)])
def test_the_environment_switch(value: str, on: bool) -> None:
    code = "from geppetto.session import freeze_collector; print(freeze_collector())"
    env = {**os.environ, "GEPPETTO_GC_FREEZE": value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(on)
