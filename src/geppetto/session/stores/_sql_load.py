"""Reading snapshots and event logs back from a SQL store: the latest alone, one, a window, or all.

Each function runs inside one operation of the store (``SQLTurnStore._run``), on its connection ``conn``."""

from __future__ import annotations

from typing import Any

from ..._exceptions import StoreError
from ...turns import Frozen, FrozenBlock, Turn, blocks_from_json, frozen_from
from ...turns import loads_json as turn_from_json
from .._store import RecordedEvent
from ._sql_parts import _SPANS, Operations, _conditions, _payload, _Tip

__all__ = ["events_of", "frozen_all", "load_one", "load_range", "turn_of"]


def frozen_all(store: Operations, sk: int, rows: list[tuple[int, str]], source: str) -> list[FrozenBlock]:
    """Frozen blocks from stored versions (``(vid, text)`` rows), each knowing where it is stored."""
    out = []
    for (vid, _text), block in zip(rows, blocks_from_json([t for _v, t in rows], source=source), strict=True):
        frozen = frozen_from(block)
        frozen.__dict__["stored"] = (store._marker, sk, vid)
        out.append(frozen)
    return out


def turn_of(document: str, frozen: Frozen, source: str) -> Turn:
    turn = turn_from_json(document, source=source, strict=False)
    turn.blocks = frozen.lazy()
    return turn


def load_one(store: Operations, conn: Any, session_id: str, seq: int | None) -> Turn | None:
    where = "" if seq is None else " AND n.seq = ?"
    params: tuple[Any, ...] = (session_id,) if seq is None else (session_id, seq)
    head = store._rows(
        conn,
        "SELECT n.seq, n.document, n.length, s.created_seq FROM snapshots n JOIN sessions s ON s.id = n.session_id "
        f"WHERE n.session_id = ?{where} ORDER BY n.seq DESC LIMIT 1",
        params,
    )
    if not head:
        return None
    number, document, length, sk = int(head[0][0]), head[0][1], head[0][2], int(head[0][3])
    source = store._source(session_id)
    tip = store._tips.get(session_id) if seq is None else None
    if tip is not None and tip.sk == sk and tip.seq <= number and length is not None:
        # This process knows an earlier latest: read only the spans opened since (what another
        # process wrote), and keep the versions it holds (and what it remembers of them).
        fresh = store._rows(
            conn,
            _SPANS + "WHERE p.sk = ? AND p.to_seq IS NULL AND p.from_seq > ? ORDER BY p.position",
            (sk, tip.seq),
        )
        blocks: list[FrozenBlock | None] = [*tip.frozen.blocks[:length]]
        blocks.extend([None] * (length - len(blocks)))
        read = frozen_all(store, sk, [(int(vid), text) for _pos, vid, text in fresh], source)
        for (position, _vid, _text), block in zip(fresh, read, strict=True):
            if int(position) < length:
                blocks[int(position)] = block
        if all(b is not None for b in blocks):
            frozen = Frozen([b for b in blocks if b is not None])
            store._remember(session_id, _Tip(sk, number, frozen))
            return turn_of(document, frozen, source)
    if seq is None:
        spans = store._rows(
            conn,
            _SPANS + "WHERE p.sk = ? AND p.to_seq IS NULL ORDER BY p.position",
            (sk,),
        )
    else:
        spans = store._rows(
            conn,
            _SPANS + "WHERE p.sk = ? AND p.from_seq <= ? AND (p.to_seq IS NULL OR p.to_seq >= ?) ORDER BY p.position",
            (sk, number, number),
        )
    if [int(r[0]) for r in spans] != list(range(length if length is not None else len(spans))):
        raise StoreError(
            f"session store {store.location}: snapshot {number} of session {session_id!r} is missing blocks "
            "(its spans do not cover its positions); the store was changed outside geppetto"
        )
    frozen = Frozen(frozen_all(store, sk, [(int(vid), text) for _pos, vid, text in spans], source))
    if seq is None:
        store._remember(session_id, _Tip(sk, number, frozen))
    return turn_of(document, frozen, source)


def load_range(
    store: Operations, conn: Any, session_id: str, first: int | None = None, last: int | None = None
) -> list[Turn]:
    """Snapshots ``first`` to ``last`` of ``session_id`` (None: from the first, to the latest), reading
    only the spans and block versions they hold."""
    where, bounds = _conditions(("seq >=", first), ("seq <=", last))
    snaps = store._rows(
        conn,
        f"SELECT seq, document, length FROM snapshots WHERE session_id = ?{where} ORDER BY seq",
        [session_id, *bounds],
    )
    if not snaps:
        return []
    sk = store._sk(conn, session_id)
    source = store._source(session_id)
    low, high = int(snaps[0][0]), int(snaps[-1][0])
    covering = "sk = ? AND from_seq <= ? AND (to_seq IS NULL OR to_seq >= ?)"
    rows = [
        (int(vid), text)
        for vid, text in store._rows(
            conn,
            f"SELECT vid, block FROM block_versions WHERE sk = ? AND vid IN (SELECT vid FROM spans WHERE {covering})",
            (sk, sk, high, low),
        )
    ]
    versions = dict(zip((vid for vid, _text in rows), frozen_all(store, sk, rows, source), strict=True))
    opens: dict[int, list[tuple[int, int]]] = {}
    for position, from_seq, vid in store._rows(
        conn, f"SELECT position, from_seq, vid FROM spans WHERE {covering}", (sk, high, low)
    ):
        # A span that began before the window holds its position from the window's first snapshot.
        opens.setdefault(max(int(from_seq), low), []).append((int(position), int(vid)))
    current: list[FrozenBlock] = []
    out: list[Turn] = []
    for number, document, length in snaps:
        for position, vid in opens.get(int(number), ()):
            if position >= len(current):
                current.extend([versions[vid]] * (position + 1 - len(current)))
            current[position] = versions[vid]
        del current[length:]
        out.append(turn_of(document, Frozen(list(current)), source))
    return out


def events_of(
    store: Operations,
    conn: Any,
    session_id: str,
    inference_id: str | None = None,
    after: float | None = None,
    until: float | None = None,
) -> list[RecordedEvent]:
    window, bounds = _conditions(("at >", after), ("at <=", until))
    # Inferences in the order they began, each one's events in the order published.
    statement = f"""SELECT e.inference_id, e.seq, e.at, e.type, e.event FROM events e
        JOIN (SELECT inference_id, min(at) AS began FROM events WHERE session_id = ?{window} GROUP BY inference_id) f
          ON f.inference_id = e.inference_id
        WHERE e.session_id = ?{window.replace(" at ", " e.at ")}"""
    params: list[Any] = [session_id, *bounds, session_id, *bounds]
    if inference_id is not None:
        statement += " AND e.inference_id = ?"
        params.append(inference_id)
    rows = store._rows(conn, statement + " ORDER BY f.began, e.inference_id, e.seq", params)
    return [RecordedEvent(i, int(s), float(a), t, _payload(e)) for i, s, a, t, e in rows]
