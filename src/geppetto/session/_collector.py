"""A long session's history kept out of the garbage collector's passes (docs/decisions.md, "The collector
and long sessions").

A session holds every block of its conversation for as long as it lives. CPython's cyclic collector walks
every object it tracks on each full pass, and starts one each time the objects that survived into the
oldest generation grew by a quarter: in a process holding a 10,000-prompt session a full pass walks the
whole history, and a restore (which makes a second copy of it) runs several. What a session keeps is
long-lived by design, so after a Session adds an output to its history, and after a restore,
:func:`settle` moves what the collector tracks into its permanent generation (``gc.freeze()``, which
costs nothing: the generations' lists are spliced). The passes after it walk only what was made since.

A frozen object is still freed by reference counting; only a reference cycle among frozen objects that
becomes garbage waits. So that it never waits for good, once the collector has seen as many new objects
since the last full cycle as were frozen then (at least :data:`MIN_GROWTH`), a settle after an output
unfreezes everything, runs one full collection and freezes again: one full pass each time the tracked
objects doubled, O(1) amortized per object, and at most about as much cyclic garbage held as was live.

Off with ``GEPPETTO_GC_FREEZE=0`` in the environment or :func:`geppetto.session.freeze_collector(False)`
(which also unfreezes); nothing is done while the collector is disabled (``gc.disable()``: the
application manages it).
"""

from __future__ import annotations

import gc
import os

__all__ = ["MIN_GROWTH", "freeze_collector", "settle"]

MIN_GROWTH = 200_000
"""Objects the collector must have seen since the last full cycle before the next one (the first one
included): below this, a full pass costs a few milliseconds and the collector's own schedule is cheap."""


class _State:
    enabled = os.environ.get("GEPPETTO_GC_FREEZE", "1").strip().lower() not in ("0", "false", "no", "off")
    frozen = 0  # objects frozen by the last full cycle
    mark = 0  # the youngest generation's collections then


def freeze_collector(enabled: bool | None = None) -> bool:
    """Whether sessions freeze what the garbage collector tracks after each output and restore (see
    docs/decisions.md); ``enabled`` turns it on or off for this process (off also unfreezes what was
    frozen, so the collector's next passes walk everything again). Returns the setting in force."""
    if enabled is not None:
        if not enabled and _State.enabled:
            gc.unfreeze()
        _State.enabled = bool(enabled)
    return _State.enabled


def _seen() -> int:
    """About how many tracked objects were made and still alive at a collection since the process started:
    each collection of the youngest generation follows that many (its threshold) new ones."""
    return int(gc.get_stats()[0]["collections"]) * gc.get_threshold()[0]


def settle(*, collect: bool = True) -> None:
    """Freeze what the collector tracks (after a session added to its history, or restored one); with
    ``collect``, first unfreeze, collect and refreeze everything when the tracked objects doubled since the
    last time."""
    if not _State.enabled or not gc.isenabled():
        return
    seen = _seen()
    if collect and seen - _State.mark >= max(MIN_GROWTH, _State.frozen):
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        _State.frozen, _State.mark = gc.get_freeze_count(), _seen()
        return
    gc.freeze()
