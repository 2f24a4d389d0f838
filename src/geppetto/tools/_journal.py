"""The journal of an inference's side effects: each tool call recorded as started before the tool runs and
with its result when it returns, in the session's store, so a run picked up by another worker or process
never runs a tool twice (docs/persistence.md, "The journal of side effects").

The executor asks the journal of the running inference (:data:`JOURNAL`, set by the Session that runs it)
before a tool runs and tells it after: a call whose result is journaled is answered with that result (the
tool does not run, no event is published again); a call journaled as started without a result was cut off
mid-run, and its tool's ``on_interrupted`` policy decides (``"retry"`` runs it again, ``"fail"`` answers
with an error the model reads, ``"ask"`` holds it for a person as an approval). Before the tools of a step
run, the tool loop records a checkpoint: the blocks the step added, so a process that restores the session
can rebuild the Turn as it stood (:meth:`Session.resume <geppetto.Session.resume>`).

Each result's ``tool_result`` event is marked as published (``pub:<call id>``) once it is out: handed to the
session's sinks, or (``geppetto serve``, which sets :data:`MARKS_PUBLISHED` to False in its inferences) on the
event bus, marked by the server's event pump. A run picked up re-publishes the event of a journaled result
only when it is not marked: published once, never lost between the journal's write and the event.

Cost: one row per tool call (written when it starts, updated when it returns), one per published result and
one per tool step; the
rows of a session are deleted when one of its inferences completes (its snapshot then holds the results).
The call id is the idempotency key: a tool that calls another system can pass it along, so a retry after
an interruption is recognized there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from ..turns import (
    TURN_META_INFERENCE_ID,
    Block,
    Mark,
    Turn,
    TurnData,
    TurnMetadata,
    added,
    block_from_json,
    block_to_json,
    copy_json,
    mark,
)
from ._tool import OnInterrupted

__all__ = [
    "JOURNAL",
    "MARKS_PUBLISHED",
    "JournalRecord",
    "JournalStore",
    "OnInterrupted",
    "RunJournal",
    "base_key",
    "interrupted_policy",
    "may_run_again",
    "published_entry",
    "rebuild",
]

log = logging.getLogger("geppetto.tools")


INTERRUPTED_ERROR = (
    "this tool call was interrupted (the process running it stopped before it returned) and was not run "
    "again, since running it twice could repeat its effect; check whether it took effect before calling it again"
)


@dataclass(frozen=True)
class JournalRecord:
    """One row of a session's journal: the inference, the entry (``call:<id>`` or ``step:<n>``), the record."""

    inference_id: str
    entry: str
    record: dict[str, Any]
    at: float


class JournalStore(Protocol):
    """What a store offers for the journal (:class:`~geppetto.session.MemoryTurnStore` and the SQL stores)."""

    async def journal_write(self, session_id: str, inference_id: str, entry: str, record: dict[str, Any]) -> None:
        """Write ``record`` under ``entry`` of the inference (replacing what the entry held)."""
        ...

    async def journal_read(self, session_id: str) -> list[JournalRecord]:
        """Every row of the session's journal, in the order first written."""
        ...

    async def journal_clear(self, session_id: str) -> None:
        """Forget the session's journal (an inference completed: its snapshot holds what it did)."""
        ...


def interrupted_policy(tool: Any) -> OnInterrupted:
    """A tool's ``on_interrupted``: its own, else ``"fail"`` when it needs approval and ``"retry"`` otherwise."""
    own = getattr(tool, "on_interrupted", None)
    if own is not None:
        return own  # type: ignore[no-any-return]
    return "fail" if getattr(tool, "requires_approval", False) is not False else "retry"


def base_key(snapshot: Turn | None) -> list[Any] | None:
    """What names the stored snapshot an inference started from (its id, inference id and length), so a
    journal is only gone on with from the snapshot it was written against."""
    if snapshot is None:
        return None
    return [snapshot.id, TURN_META_INFERENCE_ID.get(snapshot.metadata), len(snapshot.blocks)]


APPROVAL_KEY = "geppetto.approval@v1"
"""The name of ``geppetto.tools.APPROVAL``, the approval state of a ``tool_call`` block."""


def may_run_again(tool: Any, call: Block) -> bool:
    """Whether an interrupted ``call`` of ``tool`` runs again: its policy is ``"retry"``, or a person approved
    it after the interruption (``"ask"``; an approval given before it ran was for that run only)."""
    if interrupted_policy(tool) == "retry":
        return True
    # read by its name: the approval module imports the executor, which imports this one
    state = call.metadata.get(APPROVAL_KEY)
    return isinstance(state, dict) and state.get("state") == "approved" and bool(state.get("interrupted"))


class RunJournal:
    """The journal of one inference: what it wrote, and (for an inference picked up) what was journaled before.

    ``base``: the latest snapshot the store holds, so the first checkpoint writes only the blocks it lacks.
    Writes that fail are logged and the inference goes on (only a pickup after a crash would miss them).
    """

    def __init__(
        self,
        store: JournalStore,
        session_id: str,
        inference_id: str,
        *,
        base: Turn | None = None,
        records: Sequence[JournalRecord] = (),
    ) -> None:
        self.store, self.session_id, self.inference_id = store, session_id, inference_id
        self._base = base
        self._calls: dict[str, dict[str, Any]] = {
            r.entry[5:]: r.record for r in records if r.inference_id == inference_id and r.entry.startswith("call:")
        }
        self._published = {
            r.entry[4:] for r in records if r.inference_id == inference_id and r.entry.startswith("pub:")
        }
        self._steps = sum(1 for r in records if r.inference_id == inference_id and r.entry.startswith("step:"))
        self.resumed = bool(records)
        """Whether the inference goes on from a journal another process (or an earlier run) wrote."""
        self._mark: Mark | None = None
        self._failed = False
        self.wrote = False
        """Whether this run wrote to the journal (a completed run then clears it)."""

    # -- asked by the executor ------------------------------------------------------------------
    def result(self, call_id: str) -> Block | None:
        """The journaled answer (``tool_use``) of ``call_id``, None when it has none."""
        record = self._calls.get(call_id)
        if record is None or record.get("state") != "done":
            return None
        return block_from_json(str(record["block"]), source=f"the journal of inference {self.inference_id}")

    def interrupted(self, call_id: str) -> bool:
        """Whether ``call_id`` was journaled as started and never returned."""
        record = self._calls.get(call_id)
        return record is not None and record.get("state") == "started"

    async def started(self, call_id: str, name: str) -> None:
        """Before the tool runs."""
        record = {"state": "started", "name": name, "at": time.time()}
        self._calls[call_id] = record
        await self._write(f"call:{call_id}", record)

    async def finished(self, call_id: str, name: str, answer: Block) -> None:
        """When the call has its answer (before the next provider request is planned)."""
        record = {"state": "done", "name": name, "at": time.time(), "block": block_to_json(answer)}
        self._calls[call_id] = record
        await self._write(f"call:{call_id}", record)

    def was_published(self, call_id: str) -> bool:
        """Whether the ``tool_result`` event of ``call_id`` was marked as published (by this run or before)."""
        return call_id in self._published

    async def published(self, call_id: str) -> None:
        """The ``tool_result`` event of ``call_id`` is out: marked, so a pickup does not publish it again."""
        if call_id in self._published:
            return
        self._published.add(call_id)
        await self._write(published_entry(call_id), {"at": time.time()})

    # -- asked by the tool loop -------------------------------------------------------------------
    async def checkpoint(self, turn: Turn) -> None:
        """Record the Turn as it stands before the tools of a step run: the first time, the blocks the stored
        snapshot lacks (after its blocks, or with the order of every block when the Turn does not start with
        them); then the blocks added since the last checkpoint."""
        blocks = turn.blocks
        record: dict[str, Any] = {"metadata": dict(turn.metadata), "data": dict(turn.data), "turn_id": turn.id}
        if self._mark is None:
            record["base"] = base_key(self._base)
            ids = [b.id for b in list.__iter__(blocks)]  # read without copying a block
            stored = [] if self._base is None else [b.id for b in list.__iter__(self._base.blocks)]
            if ids[: len(stored)] == stored:  # the usual case: the stored snapshot, then what this turn added
                record["prefix"] = len(stored)
                fresh = [blocks[i] for i in range(len(stored), len(ids))]
            else:  # blocks inserted or moved before its end (a system prompt put first, say): their order
                record["order"] = ids
                held = set(stored)
                fresh = [blocks[i] for i, block_id in enumerate(ids) if block_id not in held]
        else:
            fresh = added(blocks, self._mark)
        record["blocks"] = [block_to_json(b) for b in fresh]
        self._steps += 1
        await self._write(f"step:{self._steps:06d}", record)
        self._mark = mark(blocks)

    async def clear(self) -> None:
        """The inference completed and its snapshot is saved: the journal is no longer needed."""
        try:
            await self.store.journal_clear(self.session_id)
        except Exception as exc:  # stale rows are ignored: the latest snapshot names the inference
            log.warning("could not clear the journal of session %s (%s)", self.session_id, exc)

    async def _write(self, entry: str, record: dict[str, Any]) -> None:
        self.wrote = True
        try:
            await self.store.journal_write(self.session_id, self.inference_id, entry, record)
        except Exception as exc:
            if not self._failed:
                self._failed = True
                log.warning(
                    "could not journal %s of inference %s (%s); if this process stops now, a pickup may run "
                    "the tool again",
                    entry,
                    self.inference_id,
                    exc,
                )


JOURNAL: ContextVar[RunJournal | None] = ContextVar("geppetto_journal", default=None)
"""The journal of the inference running in this context (None: nothing is journaled)."""

MARKS_PUBLISHED: ContextVar[bool] = ContextVar("geppetto_journal_marks_published", default=True)
"""Whether the executor marks a result's event published once the sinks have it (True), or leaves that to
whoever delivers the events on (False: ``geppetto serve``'s pump, after the event bus took the event)."""


def published_entry(call_id: str) -> str:
    """The journal entry that marks the ``tool_result`` event of ``call_id`` published."""
    return f"pub:{call_id}"


def rebuild(records: Sequence[JournalRecord], inference_id: str, base: Turn | None) -> Turn | None:
    """The Turn as it stood at the last checkpoint of ``inference_id``, from ``base`` (the latest stored
    snapshot) and the checkpoints; None when there is none, or a block it names is in neither."""
    steps = sorted((r for r in records if r.inference_id == inference_id and r.entry.startswith("step:")),
                   key=lambda r: r.entry)  # fmt: skip
    if not steps:
        return None
    source = f"the journal of inference {inference_id}"
    # read from the loaded snapshot: private copies, so the rebuilt Turn shares nothing
    known: dict[str, Block] = {b.id: b for b in base.blocks} if base is not None else {}
    blocks: list[Block] = []
    for record in (s.record for s in steps):
        fresh = [block_from_json(str(t), source=source) for t in record.get("blocks", [])]
        if "prefix" in record:
            prefix = int(record["prefix"])
            if (base is None and prefix) or (base is not None and len(base.blocks) < prefix):
                log.warning("%s starts from a snapshot the store no longer holds; it cannot be resumed", source)
                return None
            blocks = [*(base.blocks[:prefix] if base is not None else []), *fresh]
            known.update((b.id, b) for b in fresh)
        elif "order" in record:
            known.update((b.id, b) for b in fresh)
            try:
                blocks = [known[i] for i in record["order"]]
            except KeyError as exc:
                log.warning("%s names block %s, which the store no longer holds; it cannot be resumed", source, exc)
                return None
        else:
            blocks.extend(fresh)
    last = steps[-1].record
    return Turn(
        blocks,
        str(last.get("turn_id") or ""),
        TurnMetadata(copy_json(dict(last.get("metadata") or {}))),
        TurnData(copy_json(dict(last.get("data") or {}))),
    )
