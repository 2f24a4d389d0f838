"""Saving a snapshot to a SQL store: only the blocks new or changed since the snapshot before, in one transaction."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from ...turns import TURN_META_INFERENCE_ID, Turn, dumps_json
from ...turns._cow import Frozen, FrozenBlock, LazyBlockList, freeze
from ...turns._serde import block_to_json
from .._store import RecordedEvent, TimedEvent
from ._sql_load import SQLLoading
from ._sql_parts import _SPANS, _event_rows, _first_prompt, _payload, _Tip, _version_row

__all__ = ["SQLSaving"]


class _Plan:
    """The rows one save writes: the positions whose span ends, and the (position, block) pairs whose
    span begins (each block a version stored already, or to store)."""

    def __init__(self, close: list[int], open_: list[tuple[int, FrozenBlock]]) -> None:
        self.close, self.open = close, open_


def _diff(new: Frozen, old: Frozen) -> _Plan | None:
    """The spans that differ between ``old`` and ``new`` (a snapshot derived from it), reading only what
    the derivation says may have changed; None when ``new`` does not descend from ``old`` closely."""
    keep = len(new.blocks)
    patched: set[int] = set()
    node: Frozen | None = new
    for _ in range(64):
        if node is None or node is old:
            break
        keep = min(keep, node.keep)
        patched.update(node.patches)
        node = node.parent
    if node is not old:
        return None
    nb, ob = new.blocks, old.blocks
    keep = min(keep, len(ob))
    changed = [i for i in sorted(patched) if i < keep and nb[i] is not ob[i]]
    changed += [i for i in range(keep, len(nb)) if i >= len(ob) or nb[i] is not ob[i]]
    close = [i for i in changed if i < len(ob)] + list(range(max(len(nb), keep), len(ob)))
    return _Plan(close, [(i, nb[i]) for i in changed])


class SQLSaving(SQLLoading):
    """Saving snapshots (with the events of the inference that made them) and summing up event logs."""

    def _summarize(self, conn: Any, session_id: str, blocks: Frozen | None, rows: list[tuple[Any, ...]]) -> None:
        """Add one inference's events (``rows`` of the events table) to the session's summary, in the
        transaction that saves them; ``blocks``: the snapshot the inference saved (None: none)."""
        from ...web._report import add_totals, inference_totals

        wanted = [RecordedEvent(r[1], r[2], r[3], r[4], json.loads(r[5])) for r in rows if r[4] in ("final", "error")]
        totals = inference_totals(blocks, wanted)
        held = self._rows(conn, "SELECT events, totals FROM session_summaries WHERE session_id = ?", (session_id,))
        if held:
            self._exec(
                conn,
                "UPDATE session_summaries SET events = ?, totals = ? WHERE session_id = ?",
                (int(held[0][0]) + len(rows), json.dumps(add_totals(_payload(held[0][1]), totals)), session_id),
            )
        else:
            self._exec(
                conn,
                "INSERT INTO session_summaries (session_id, events, totals) VALUES (?, ?, ?)",
                (session_id, len(rows), json.dumps(totals)),
            )

    def _open_spans(self, conn: Any, sk: int) -> dict[int, tuple[int, str]]:
        rows = self._rows(
            conn,
            _SPANS + "WHERE p.sk = ? AND p.to_seq IS NULL",
            (sk,),
        )
        return {int(pos): (int(vid), block) for pos, vid, block in rows}

    def _plan_by_content(self, conn: Any, sk: int, frozen: Frozen) -> _Plan:
        """The spans that differ from the stored latest snapshot, comparing every block's JSON text."""
        stored = self._open_spans(conn, sk)
        blocks = frozen.blocks
        close, open_ = [], []
        for i, block in enumerate(blocks):
            held = stored.get(i)
            if held is not None and (self._vid(block, sk) == held[0] or block_to_json(block) == held[1]):
                block.__dict__["stored"] = (self._marker, sk, held[0])
                continue
            if held is not None:
                close.append(i)
            open_.append((i, block))
        close += [i for i in stored if i >= len(blocks)]
        return _Plan(close, open_)

    def _save(
        self,
        conn: Any,
        session_id: str,
        ids: tuple[str, str | None],
        frozen: Frozen,
        document: str,
        events: list[tuple[Any, ...]] | None,
    ) -> _Tip:
        with self._transaction(conn):
            self._ensure_session(conn, session_id)
            seq = self._rows(
                conn, "SELECT coalesce(max(seq), 0) + 1 FROM snapshots WHERE session_id = ?", (session_id,)
            )
            number = int(seq[0][0])
            tip = self._tips.get(session_id)
            plan = _diff(frozen, tip.frozen) if tip is not None and tip.seq == number - 1 else None
            sk = tip.sk if tip is not None else self._sk(conn, session_id)
            if plan is None:
                plan = self._plan_by_content(conn, sk, frozen)
            self._exec(
                conn,
                "INSERT INTO snapshots (session_id, seq, turn_id, document, inference_id, saved_at, length) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    number,
                    ids[0],
                    document,
                    ids[1],
                    time.time(),
                    len(frozen.blocks),
                ),
            )
            pending = self._write_spans(conn, sk, number, plan)
            if number == 1:
                self._exec(
                    conn,
                    "UPDATE sessions SET first_prompt = ? WHERE id = ?",
                    (_first_prompt(frozen.blocks), session_id),
                )
            if events:
                self._insert_events(conn, events)
                self._summarize(conn, session_id, frozen, events)
        # Only once the transaction committed do the blocks count as stored.
        for block, vid in pending.values():
            block.__dict__["stored"] = (self._marker, sk, vid)
        return _Tip(sk, number, frozen)

    def _write_spans(self, conn: Any, sk: int, number: int, plan: _Plan) -> dict[int, tuple[FrozenBlock, int]]:
        """Close the spans ``plan`` ends at snapshot ``number - 1`` and open its new ones at ``number``, storing
        each block version not stored yet; the versions stored here, by block (counted once committed)."""
        if plan.close:
            self._exec_many(
                conn,
                "UPDATE spans SET to_seq = ? WHERE sk = ? AND position = ? AND to_seq IS NULL",
                [(number - 1, sk, i) for i in plan.close],
            )
        new_versions: list[tuple[Any, ...]] = []
        spans: list[tuple[Any, ...]] = []
        pending: dict[int, tuple[FrozenBlock, int]] = {}
        next_vid: int | None = None
        for position, block in plan.open:
            vid = self._vid(block, sk)
            if vid is None and id(block) in pending:
                vid = pending[id(block)][1]
            if vid is None:
                if next_vid is None:
                    rows = self._rows(conn, "SELECT coalesce(max(vid), 0) FROM block_versions WHERE sk = ?", (sk,))
                    next_vid = int(rows[0][0])
                next_vid += 1
                vid = next_vid
                pending[id(block)] = (block, vid)
                new_versions.append(_version_row(sk, vid, block))
            spans.append((sk, position, number, vid))
        if new_versions:
            self._exec_many(conn, "INSERT INTO block_versions VALUES (?, ?, ?, ?, ?)", new_versions)
        if spans:
            self._exec_many(conn, "INSERT INTO spans (sk, position, from_seq, vid) VALUES (?, ?, ?, ?)", spans)
        return pending

    def _insert_events(self, conn: Any, events: list[tuple[Any, ...]]) -> None:
        statement = "INSERT INTO events (session_id, inference_id, seq, at, type, event) VALUES (?, ?, ?, ?, ?, ?)"
        self._exec_many(conn, statement, events)

    def _save_events(self, conn: Any, session_id: str, events: list[tuple[Any, ...]]) -> None:
        with self._transaction(conn):
            self._ensure_session(conn, session_id)
            self._insert_events(conn, events)
            self._summarize(conn, session_id, None, events)

    # -- the TurnStore interface ----------------------------------------------------------------
    async def save_snapshot(self, session_id: str, turn: Turn, *, events: Sequence[TimedEvent] | None = None) -> None:
        """Append ``turn`` as the newest snapshot of ``session_id``, with the events of the inference that
        produced it when given; all in one transaction, so all of it or nothing. Only blocks that are new
        or changed since the snapshot before are written (see docs/persistence.md)."""
        inference_id = TURN_META_INFERENCE_ID.get(turn.metadata) or ""
        rows = _event_rows(session_id, inference_id, events) if events else None
        blocks = turn.blocks
        tip = self._tips.get(session_id)
        if isinstance(blocks, LazyBlockList) and blocks.origin is not None:
            frozen = freeze(blocks, blocks.origin)
        else:  # a Turn from elsewhere: compared with what this store last held, block by block
            frozen = freeze(blocks, tip.frozen if tip is not None else None)
        document = dumps_json(Turn(id=turn.id, metadata=turn.metadata, data=turn.data))
        # Everything is read from ``turn`` before the first await (see ``TurnStore.reads_at_once``).
        ids = (turn.id, TURN_META_INFERENCE_ID.get(turn.metadata))
        self._remember(session_id, await self._run(self._save, session_id, ids, frozen, document, rows))

    async def save_events(self, session_id: str, inference_id: str, events: Sequence[TimedEvent]) -> None:
        """Record the event log of an inference that produced no snapshot (it failed or was cancelled)."""
        if events:
            await self._run(self._save_events, session_id, _event_rows(session_id, inference_id, events))
