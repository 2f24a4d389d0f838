"""Saving a snapshot to a SQL store: only the blocks new or changed since the snapshot before, in one transaction.

Each function runs inside one operation of the store (``SQLTurnStore._run``), on its connection ``conn``."""

from __future__ import annotations

import json
import time
from typing import Any

from ...turns import Frozen, FrozenBlock, block_to_json
from .._requests import inference_totals
from .._store import RecordedEvent
from .._totals import add_totals
from ._sql_parts import _SPANS, Operations, _first_prompt, _payload, _Tip, _version_row

__all__ = ["save", "save_events"]


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
    # ``old`` (the store's last snapshot) may have dropped its list: its entries are read through its
    # parents, only where the derivation says they may differ, never rebuilt whole
    nb, size, at = new.blocks, old.size(), old.at
    keep = min(keep, size)
    changed = [i for i in sorted(patched) if i < keep and nb[i] is not at(i)]
    changed += [i for i in range(keep, len(nb)) if i >= size or nb[i] is not at(i)]
    close = [i for i in changed if i < size] + list(range(max(len(nb), keep), size))
    return _Plan(close, [(i, nb[i]) for i in changed])


def summarize(
    store: Operations, conn: Any, session_id: str, blocks: Frozen | None, rows: list[tuple[Any, ...]]
) -> None:
    """Add one inference's events (``rows`` of the events table) to the session's summary, in the
    transaction that saves them; ``blocks``: the snapshot the inference saved (None: none)."""
    wanted = [RecordedEvent(r[1], r[2], r[3], r[4], json.loads(r[5])) for r in rows if r[4] in ("final", "error")]
    totals = inference_totals(blocks, wanted)
    held = store._rows(conn, "SELECT events, totals FROM session_summaries WHERE session_id = ?", (session_id,))
    if held:
        store._exec(
            conn,
            "UPDATE session_summaries SET events = ?, totals = ? WHERE session_id = ?",
            (int(held[0][0]) + len(rows), json.dumps(add_totals(_payload(held[0][1]), totals)), session_id),
        )
    else:
        store._exec(
            conn,
            "INSERT INTO session_summaries (session_id, events, totals) VALUES (?, ?, ?)",
            (session_id, len(rows), json.dumps(totals)),
        )


def open_spans(store: Operations, conn: Any, sk: int) -> dict[int, tuple[int, str]]:
    rows = store._rows(
        conn,
        _SPANS + "WHERE p.sk = ? AND p.to_seq IS NULL",
        (sk,),
    )
    return {int(pos): (int(vid), block) for pos, vid, block in rows}


def plan_by_content(store: Operations, conn: Any, sk: int, frozen: Frozen) -> _Plan:
    """The spans that differ from the stored latest snapshot, comparing every block's JSON text."""
    stored = open_spans(store, conn, sk)
    blocks = frozen.blocks
    close, open_ = [], []
    for i, block in enumerate(blocks):
        held = stored.get(i)
        if held is not None and (store._vid(block, sk) == held[0] or block_to_json(block) == held[1]):
            block.__dict__["stored"] = (store._marker, sk, held[0])
            continue
        if held is not None:
            close.append(i)
        open_.append((i, block))
    close += [i for i in stored if i >= len(blocks)]
    return _Plan(close, open_)


def save(
    store: Operations,
    conn: Any,
    session_id: str,
    ids: tuple[str, str | None],
    frozen: Frozen,
    document: str,
    events: list[tuple[Any, ...]] | None,
) -> _Tip:
    with store._transaction(conn):
        store._ensure_session(conn, session_id)
        seq = store._rows(conn, "SELECT coalesce(max(seq), 0) + 1 FROM snapshots WHERE session_id = ?", (session_id,))
        number = int(seq[0][0])
        tip = store._tips.get(session_id)
        plan = _diff(frozen, tip.frozen) if tip is not None and tip.seq == number - 1 else None
        sk = tip.sk if tip is not None else store._sk(conn, session_id)
        if plan is None:
            plan = plan_by_content(store, conn, sk, frozen)
        store._exec(
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
        pending = write_spans(store, conn, sk, number, plan)
        if number == 1:
            store._exec(
                conn,
                "UPDATE sessions SET first_prompt = ? WHERE id = ?",
                (_first_prompt(frozen.blocks), session_id),
            )
        if events:
            insert_events(store, conn, events)
            summarize(store, conn, session_id, frozen, events)
    # Only once the transaction committed do the blocks count as stored.
    for block, vid in pending.values():
        block.__dict__["stored"] = (store._marker, sk, vid)
    return _Tip(sk, number, frozen)


def write_spans(store: Operations, conn: Any, sk: int, number: int, plan: _Plan) -> dict[int, tuple[FrozenBlock, int]]:
    """Close the spans ``plan`` ends at snapshot ``number - 1`` and open its new ones at ``number``, storing
    each block version not stored yet; the versions stored here, by block (counted once committed)."""
    if plan.close:
        store._exec_many(
            conn,
            "UPDATE spans SET to_seq = ? WHERE sk = ? AND position = ? AND to_seq IS NULL",
            [(number - 1, sk, i) for i in plan.close],
        )
    new_versions: list[tuple[Any, ...]] = []
    spans: list[tuple[Any, ...]] = []
    pending: dict[int, tuple[FrozenBlock, int]] = {}
    next_vid: int | None = None
    for position, block in plan.open:
        vid = store._vid(block, sk)
        if vid is None and id(block) in pending:
            vid = pending[id(block)][1]
        if vid is None:
            if next_vid is None:
                rows = store._rows(conn, "SELECT coalesce(max(vid), 0) FROM block_versions WHERE sk = ?", (sk,))
                next_vid = int(rows[0][0])
            next_vid += 1
            vid = next_vid
            pending[id(block)] = (block, vid)
            new_versions.append(_version_row(sk, vid, block))
        spans.append((sk, position, number, vid))
    if new_versions:
        store._exec_many(conn, "INSERT INTO block_versions VALUES (?, ?, ?, ?, ?)", new_versions)
    if spans:
        store._exec_many(conn, "INSERT INTO spans (sk, position, from_seq, vid) VALUES (?, ?, ?, ?)", spans)
    return pending


def insert_events(store: Operations, conn: Any, events: list[tuple[Any, ...]]) -> None:
    statement = "INSERT INTO events (session_id, inference_id, seq, at, type, event) VALUES (?, ?, ?, ?, ?, ?)"
    store._exec_many(conn, statement, events)


def save_events(store: Operations, conn: Any, session_id: str, events: list[tuple[Any, ...]]) -> None:
    with store._transaction(conn):
        store._ensure_session(conn, session_id)
        insert_events(store, conn, events)
        summarize(store, conn, session_id, None, events)
