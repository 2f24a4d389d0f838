"""The background responses a server's inferences are reading (schema versions 6 and 7, ``background_responses``;
a background interaction of the Interactions engine is recorded the same way):
what another worker needs to pick an inference up when the worker running it dies (docs/responses.md,
"Background responses")."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ...turns import Turn, turn_from_dict
from ._sql import SQLTurnStore

__all__ = [
    "BackgroundRecord",
    "background_response",
    "forget_background_response",
    "save_background_cursor",
    "save_background_response",
    "set_events_aside",
]


@dataclass(frozen=True)
class BackgroundRecord:
    """A background response an inference was reading: its id, the Turn the engine sent it for, and the
    last ``sequence_number`` whose events were published (-1: none yet), with what a resume after it
    names when the number does not say it (``resume_after``: an Interactions ``event_id``)."""

    session_id: str
    inference_id: str
    response_id: str
    cursor: int
    turn: Turn
    resume_after: str | None = None


async def save_background_response(
    store: SQLTurnStore, session_id: str, inference_id: str, response_id: str, turn: dict[str, Any]
) -> None:
    """Record that ``inference_id`` reads ``response_id``, made for ``turn`` (its document); it replaces the
    response the inference read before (a tool loop's earlier request)."""

    def save(conn: Any) -> None:
        with store._transaction(conn):
            store._exec(
                conn,
                "DELETE FROM background_responses WHERE session_id = ? AND inference_id = ?",
                (session_id, inference_id),
            )
            store._exec(
                conn,
                "INSERT INTO background_responses (session_id, inference_id, response_id, sequence_number, turn, updated_at) "
                "VALUES (?, ?, ?, -1, ?, ?)",
                (session_id, inference_id, response_id, json.dumps(turn, ensure_ascii=False), time.time()),
            )

    await store._run(save)


async def save_background_cursor(
    store: SQLTurnStore,
    session_id: str,
    inference_id: str,
    response_id: str,
    cursor: int,
    resume_after: str | None = None,
) -> None:
    """The events of ``response_id`` up to ``cursor`` (``resume_after``: the last one's id) are published."""
    await store._run(
        store._exec,
        "UPDATE background_responses SET sequence_number = ?, resume_after = ?, updated_at = ? "
        "WHERE session_id = ? AND inference_id = ? AND response_id = ? AND sequence_number < ?",
        (cursor, resume_after, time.time(), session_id, inference_id, response_id, cursor),
    )


async def background_response(store: SQLTurnStore, session_id: str, inference_id: str) -> BackgroundRecord | None:
    """The background response ``inference_id`` was reading, None when it read none."""
    rows = await store._run(
        store._rows,
        "SELECT response_id, sequence_number, turn, resume_after FROM background_responses "
        "WHERE session_id = ? AND inference_id = ?",
        (session_id, inference_id),
    )
    if not rows:
        return None
    response_id, cursor, document, resume_after = rows[0]
    turn = turn_from_dict(json.loads(document), source=f"background response {response_id}")
    after = None if resume_after is None else str(resume_after)
    return BackgroundRecord(session_id, inference_id, str(response_id), int(cursor), turn, after)


async def forget_background_response(store: SQLTurnStore, session_id: str, inference_id: str) -> None:
    """The inference ended: nobody needs its background response any more."""
    await store._run(
        store._exec,
        "DELETE FROM background_responses WHERE session_id = ? AND inference_id = ?",
        (session_id, inference_id),
    )


async def set_events_aside(store: SQLTurnStore, session_id: str, inference_id: str) -> int:
    """Number the events recorded so far for ``inference_id`` (a worker that stopped saved them as a
    cancelled inference's) below every other, keeping their order, so the worker that picks the inference
    up records its own from 0 after them; how many there were."""

    def shift(conn: Any) -> int:
        with store._transaction(conn):
            where = "WHERE session_id = ? AND inference_id = ?"
            [(count, low, high)] = store._rows(
                conn, f"SELECT count(*), min(seq), max(seq) FROM events {where}", (session_id, inference_id)
            )
            if count:  # below the lowest: no number is taken twice while the rows move
                store._exec(
                    conn,
                    f"UPDATE events SET seq = seq - ? {where}",
                    (int(high) - int(low) + 1, session_id, inference_id),
                )
            return int(count)

    return await store._run(shift)
