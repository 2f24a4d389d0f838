"""The pre-send prefix guard: replayed reasoning goes out only after the prefix it was produced after.

Claude binds each ``thinking`` / ``redacted_thinking`` block's signature to the ``system`` prompt, the
``tools`` and every message content before the block; OpenAI silently drops a ``reasoning`` item whose
earlier items changed; Gemini's thought signatures belong to the turn that made them. Middleware that
rewrites a system prompt, swaps tools or edits an old block therefore turns replayed reasoning stale: a
400 from Claude, a silent loss (and a bigger bill) from OpenAI.

Each engine that replays reasoning describes its request as a list of :class:`Unit` (the canonical wire
bytes of each piece the provider binds, in wire order, with the block it came from) under a header (what
else the provider binds: Claude's system and tools). When a response's reasoning blocks arrive the
engine stamps each with the digest of everything before it (:func:`stamp`, block metadata
:data:`REASONING_PREFIX`); before the next request leaves :func:`check` walks the units once, and a
reasoning unit whose recorded digest differs from the digest of what now precedes it is stale. A stale
block is left out of the running digest, so the reasoning after it is judged on what is really sent
(Claude: "that block and every later thinking block are invalid").

What happens to stale reasoning is the engine's ``prefix_policy`` (:data:`PREFIX_POLICIES`):

- ``"drop"`` (default): leave it out (for good: :data:`REASONING_STALE`), warn naming the middleware that changed the prefix (block
  provenance, ``geppetto.middleware@v1``), count it (:data:`guard_metrics`, an ``EventLog`` and the
  turn's ``geppetto.prefix_guard@v1`` metadata). Never a provider 400.
- ``"rewrite"``: keep the prefix append-only where the provider allows it (Claude: the old system prompt
  stays and the new one goes as an appended system message); what cannot be rewritten is dropped, and the
  warning says so.
- ``"append"``: send a changed system prompt as an appended system message where the provider and model
  take one (Claude's newest models), so nothing goes stale; elsewhere ``"drop"``, and the warning and the
  report (``fallback``) say so. A middleware can ask for a policy for the Turn's requests
  (:data:`PREFIX_POLICY_ASKED`, ``system_prompt(text, policy=...)``).
- ``"error"``: raise :class:`~geppetto.PrefixChangedError` naming the middleware and the block.

A reasoning block with no recorded digest (made before this guard, or by a stateless path that records
none) cannot be proven either way and is replayed as it is.

Like the anchor proof, a pass is incremental: an engine whose request is a list of messages keeps with the
Turn (:class:`Progress`, in its blocks' edit watch, ``geppetto.turns._watch``) how many whole messages it
proved and the running digest after them; while no block they came from changed, the next pass reads only
the messages after them (:func:`proven`, :func:`keep`), so a request whose prefix did not change costs
O(new blocks). Any change the watch sees, another header or scope, or a stale block found, means a whole pass.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .._exceptions import ConfigurationError, PrefixChangedError
from ..events import EventLog, metadata_for, publish
from ..turns import (
    BLOCK_META_MIDDLEWARE,
    BLOCK_META_PROVIDER,
    NO_EDIT,
    PREFIX_POLICIES,
    TURN_DATA_PREFIX_POLICY,
    Block,
    BlockList,
    FrozenBlock,
    Turn,
    Watch,
    block_meta_key,
    seal_block,
    turn_meta_key,
    watch_metadata_keys,
)

__all__ = [
    "APPEND_FALLBACK",
    "PREFIX_POLICIES",
    "PREFIX_POLICY_ASKED",
    "REASONING_PREFIX",
    "REASONING_STALE",
    "TURN_META_PREFIX_GUARD",
    "GuardMetrics",
    "Progress",
    "Stale",
    "Unit",
    "advanced",
    "apply_policy",
    "asked_policy",
    "check",
    "check_policy",
    "guard_metrics",
    "header_digest",
    "keep",
    "proven",
    "proven_for",
    "quick_check",
    "stamp",
    "start_digest",
]

log = logging.getLogger("geppetto.providers.prefix_guard")

PREFIX_POLICY_ASKED = TURN_DATA_PREFIX_POLICY
"""``geppetto.prefix_policy@v1`` in turn data: the policy a middleware asked for (``system_prompt(text,
policy="append")``); it overrides the engine's ``prefix_policy`` for this Turn's requests."""

APPEND_FALLBACK = "this engine or model takes no appended system message: dropped instead"
"""What a drop under ``append`` says when the engine could not send the change as an appended message."""

REASONING_PREFIX = block_meta_key("geppetto", "reasoning_prefix", 1, dict)
"""``geppetto.reasoning_prefix@v1`` on a reasoning block: ``{"head": digest of the header (Claude: system
and tools), "prefix": digest of the header and every unit before the block}`` as they were when the
provider produced it; ``"scope"`` names the wire form the digests were made in when it is not the
provider's block dialect (the Interactions API's steps): a block is judged only in its own scope."""

REASONING_STALE = block_meta_key("geppetto", "reasoning_stale", 1, bool)
"""``geppetto.reasoning_stale@v1``: set by an engine that left the block out because its prefix changed; a
stale block stays out of every later request (its prefix cannot come back) and out of the wire form the
Responses anchor proof fingerprints, since the server never received it."""

watch_metadata_keys(REASONING_PREFIX, REASONING_STALE, BLOCK_META_PROVIDER)  # what a block's unit depends on

TURN_META_PREFIX_GUARD = turn_meta_key("geppetto", "prefix_guard", 1, dict)
"""What the guard did on the Turn's last request: ``{"policy", "dropped", "dropped_bytes", "rewritten",
"changed_by", "blocks"}`` (absent when nothing was stale)."""


@dataclass(frozen=True, slots=True)
class Unit:
    """One piece of a request as the provider binds it: its canonical bytes, the block it came from, and
    whether it is replayed reasoning whose prefix must be proven."""

    wire: bytes
    block: Block | None = None
    reasoning: bool = False


@dataclass(frozen=True, slots=True)
class Stale:
    """A replayed reasoning block whose prefix changed: the unit's index, the block, what changed."""

    index: int
    block: Block
    header_changed: bool
    changed_by: str
    changed_block: str


def header_digest(*parts: Any) -> str:
    """The digest of the header parts (each already canonical bytes or text)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\x1e")
    return h.hexdigest()


def start_digest(head: str) -> Any:
    """The running sha256 a prefix starts from: the header, then a newline (nothing for an empty header,
    so an engine may start from a hasher it already keeps over its blocks' wire forms)."""
    h = hashlib.sha256()
    if head:
        h.update(head.encode())
        h.update(b"\n")
    return h


def stamp(units: Sequence[Unit], head: str, new: Iterable[Block], *, start: Any = None, scope: str = "") -> int:
    """Record on each reasoning block of ``new`` (the blocks a response just produced) the digest of the
    header and every unit before it; returns how many were stamped. ``start``: a running digest over
    the units before ``units`` (from :func:`start_digest`), when the caller passes only the last ones.
    ``scope``: the wire form's name when two engines could replay the same block in different forms."""
    wanted = {id(b) for b in new}
    h = start.copy() if start is not None else start_digest(head)
    stamped = 0
    for unit in units:
        if unit.reasoning and unit.block is not None and id(unit.block) in wanted:
            record = {"head": head, "prefix": h.hexdigest()}
            if scope:
                record["scope"] = scope
            REASONING_PREFIX.set(unit.block.metadata, record)
            stamped += 1
        h.update(unit.wire)
    return stamped


def check(units: Sequence[Unit], head: str, *, scope: str = "", start: Any = None) -> list[Stale]:
    """The replayed reasoning units whose recorded prefix is not what now precedes them (stale ones are
    left out of the running digest: they are not sent, and what follows is judged without them). A
    digest recorded in another ``scope`` (see :func:`stamp`) proves nothing here: replayed as it is.
    ``start``: a running digest over units before ``units`` that a pass proved (:class:`Progress`; it is
    updated in place); the indexes of what is found are then ``units``'."""
    h = start if start is not None else start_digest(head)
    stale: list[Stale] = []
    for index, unit in enumerate(units):
        if unit.reasoning and unit.block is not None:
            recorded = REASONING_PREFIX.get(unit.block.metadata)
            if not isinstance(recorded, dict) or recorded.get("scope", "") != scope:
                recorded = None
            if recorded is not None and recorded.get("prefix") != h.hexdigest():
                header_changed = recorded.get("head") != head
                changed_by, changed_block = _culprit(units[:index], header_changed, stale)
                stale.append(Stale(index, unit.block, header_changed, changed_by, changed_block))
                continue
        h.update(unit.wire)
    return stale


@dataclass
class Progress:
    """What the guard's last pass over a Turn proved: the first ``messages`` whole messages of its request
    (``units`` units, none stale; ``reasoning``: whether any is replayed reasoning) under ``head`` and
    ``scope``, and the running digest after them."""

    head: str
    scope: str
    messages: int
    units: int
    hasher: Any
    reasoning: bool = False

    def copy(self) -> Progress:
        """The progress for a copy of the Turn (``Turn.clone``, a session's next prompt)."""
        return Progress(self.head, self.scope, self.messages, self.units, self.hasher.copy(), self.reasoning)


def proven(turn: Turn, head: str, scope: str = "") -> Progress | None:
    """The guard's progress kept with ``turn`` when it still holds (no block it covers changed, moved or
    went; the same header and scope), else None. Its ``hasher`` is the Turn's: copy it before adding."""
    blocks = turn.blocks
    watch = blocks.held() if isinstance(blocks, BlockList) else None
    progress = watch.state if watch is not None else None
    if isinstance(progress, Progress) and progress.head == head and progress.scope == scope:
        return progress
    return None


def keep(turn: Turn, progress: Progress | None) -> None:
    """Keep ``progress`` with ``turn``, its blocks sealed so that a change of any of them is seen (None:
    forget any kept). A Turn whose blocks another reader watches (an anchor proof) is left alone: one
    watch per list, and the proof is worth more than the guard's shortcut."""
    blocks = turn.blocks
    if not isinstance(blocks, BlockList):
        return
    watch = blocks.watch
    if watch is not None and not isinstance(watch.state, Progress):
        return
    if progress is None:
        if watch is not None:
            watch.state, watch.k = None, 0
        return
    held = blocks.held()
    if watch is None:
        watch = blocks.watch = Watch()
    n = len(blocks)
    for i in range(held.k if held is not None else 0, n):
        block = list.__getitem__(blocks, i)
        # a stored version nobody edits; a later read of it gets a copy sealed for this watch
        if type(block) is not FrozenBlock and seal_block(block, watch).loose:
            watch.state, watch.k = None, 0  # a value that cannot be watched: every pass reads the Turn
            return
    watch.state, watch.k, watch.dirty, blocks.low = progress, n, False, NO_EDIT


def proven_for(turn: Turn, head: str, messages: int, scope: str = "") -> Progress | None:
    """:func:`proven`, when the progress also holds for a request of ``messages`` messages (some message
    follows the proven ones)."""
    progress = proven(turn, head, scope)
    return progress if progress is not None and progress.messages < messages else None


def advanced(
    progress: Progress | None, head: str, units: Sequence[Unit], last: int, messages: int, scope: str = ""
) -> Progress:
    """The progress after a pass that found nothing stale over a request of ``messages`` messages (``units``:
    theirs from ``progress``'s end on, ``last`` of them the last message's): every message but the last,
    which the next blocks may still add to."""
    start = progress.hasher.copy() if progress is not None else start_digest(head)
    upto = len(units) - last
    reasoning = progress is not None and progress.reasoning
    for unit in units[:upto]:
        start.update(unit.wire)
        reasoning = reasoning or unit.reasoning
    done = progress.units if progress is not None else 0
    return Progress(head, scope, messages - 1, done + upto, start, reasoning)


M = TypeVar("M")


def quick_check(
    turn: Turn,
    head: str,
    messages: Sequence[M],
    units_of: Callable[[Sequence[M]], list[Unit]],
    parts: Callable[[M], int],
    scope: str = "",
) -> bool | None:
    """The guard's pass over the messages after the proven ones, when the progress kept with ``turn`` holds:
    whether the request replays reasoning, once nothing stale was found (the progress goes on); None when a
    whole pass must run (nothing kept, something changed, or a stale block: the whole pass names the
    culprit). ``units_of`` reads messages as units, ``parts`` counts a message's units."""
    progress = proven_for(turn, head, len(messages), scope)
    if progress is None:
        return None
    units = units_of(messages[progress.messages :])
    if check(units, head, scope=scope, start=progress.hasher.copy()):
        return None
    keep(turn, advanced(progress, head, units, parts(messages[-1]), len(messages), scope))
    return progress.reasoning or any(u.reasoning for u in units)


def _culprit(before: Sequence[Unit], header_changed: bool, stale: list[Stale]) -> tuple[str, str]:
    """(middleware, block) that most likely changed the prefix: the header, else the latest block before
    the stale one that a middleware says it created or edited."""
    if stale:
        return stale[0].changed_by, stale[0].changed_block
    if header_changed:
        return "", "the system prompt or the tool list"
    for unit in reversed(before):
        block = unit.block
        if block is not None:
            name = BLOCK_META_MIDDLEWARE.get(block.metadata)
            if name:
                return name, f"{block.kind.value} block {block.id}"
    return "", "a block before it (edited, inserted, removed or moved)"


@dataclass
class GuardMetrics:
    """Process-wide counts of what the guard did, by provider (thread-safe)."""

    dropped: dict[str, int] = field(default_factory=dict)
    dropped_bytes: dict[str, int] = field(default_factory=dict)
    rewritten: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    transformations: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, counter: str, provider: str, n: int = 1) -> None:
        with self._lock:
            table: dict[str, int] = getattr(self, counter)
            table[provider] = table.get(provider, 0) + n

    def snapshot(self) -> dict[str, dict[str, int]]:
        """The counts as plain dicts: ``{"dropped": {"anthropic": 2}, ...}``."""
        with self._lock:
            names = ("dropped", "dropped_bytes", "rewritten", "errors", "transformations")
            return {name: dict(getattr(self, name)) for name in names}

    def reset(self) -> None:
        with self._lock:
            for name in ("dropped", "dropped_bytes", "rewritten", "errors", "transformations"):
                getattr(self, name).clear()


guard_metrics = GuardMetrics()
"""What every engine's guard did in this process."""


def asked_policy(turn: Turn, policy: str) -> str:
    """The policy for ``turn``'s request: the one a middleware asked for (:data:`PREFIX_POLICY_ASKED`), else
    the engine's ``policy``."""
    asked = PREFIX_POLICY_ASKED.get(turn.data)
    return asked if asked in PREFIX_POLICIES else policy


def check_policy(policy: str) -> str:
    """``policy`` when it is one of :data:`PREFIX_POLICIES`, else a ConfigurationError naming them."""
    if policy not in PREFIX_POLICIES:
        raise ConfigurationError(f"prefix_policy={policy!r}: use one of {', '.join(map(repr, PREFIX_POLICIES))}")
    return policy


def _who(stale: Stale) -> str:
    if stale.changed_by:
        return f"middleware {stale.changed_by!r}"
    return "a change with no middleware named on it (geppetto.middleware@v1 unset)"


def error_text(provider: str, stale: Stale) -> str:
    """The message of :class:`PrefixChangedError` for ``stale``."""
    return (
        f"{provider}: reasoning block {stale.block.id} was produced after a prefix that has changed since: "
        f"{_who(stale)} changed {stale.changed_block}. The provider would reject or silently drop it. "
        "Keep the change append-only (add a new block at the end instead of editing an earlier one), or pass "
        "prefix_policy='drop' (leave the stale reasoning out) or 'rewrite' to the engine"
    )


def apply_policy(
    turn: Turn,
    provider: str,
    model: str,
    policy: str,
    stale: list[Stale],
    units: Sequence[Unit],
    *,
    rewritten: int = 0,
    note: str = "",
) -> None:
    """Report what ``policy`` does with ``stale`` (the engine leaves them out; ``error`` raises here).

    ``rewritten`` counts blocks the engine kept by rewriting the request append-only; ``note`` says what
    could not be rewritten. Under ``append`` with no ``note``, what was dropped is said to be the fallback
    (:data:`APPEND_FALLBACK`), and the report carries it as ``fallback``."""
    if policy == "append" and stale and not note:
        note = APPEND_FALLBACK
    if not stale and not rewritten:
        TURN_META_PREFIX_GUARD.delete(turn.metadata)
        return
    if policy == "error" and stale:
        guard_metrics.add("errors", provider)
        raise PrefixChangedError(error_text(provider, stale[0]))
    for s in stale:  # for good: its prefix cannot come back, and later reasoning is bound without it
        REASONING_STALE.set(s.block.metadata, True)
    cost = sum(len(units[s.index].wire) for s in stale)
    guard_metrics.add("dropped", provider, len(stale))
    guard_metrics.add("dropped_bytes", provider, cost)
    if rewritten:
        guard_metrics.add("rewritten", provider, rewritten)
    first = stale[0] if stale else None
    changed_by = first.changed_by if first else ""
    report = {
        "policy": policy,
        "dropped": len(stale),
        "dropped_bytes": cost,
        "rewritten": rewritten,
        "changed_by": changed_by,
        "changed": first.changed_block if first else "",
        "blocks": [s.block.id for s in stale],
    }
    if policy == "append" and stale:
        report["fallback"] = note
    TURN_META_PREFIX_GUARD.set(turn.metadata, report)
    if first is not None:
        message = (
            f"{provider}: left out {len(stale)} replayed reasoning block(s) ({cost} bytes of reasoning the model "
            f"will not see) whose prefix changed: {_who(first)} changed {first.changed_block}"
        )
        if note:
            message += f" ({note})"
    else:  # nothing lost: worth a line, not a warning
        message = f"{provider}: kept {rewritten} reasoning block(s) by sending the changed prefix append-only"
    level = "warning" if first is not None else "info"
    log.log(logging.WARNING if first is not None else logging.INFO, "%s", message)
    publish(EventLog(metadata_for(turn, provider, model), level, message, {"prefix_guard": report}))
