"""Small pieces the SQL store's functions share: what they use of their store, the remembered latest snapshot,
statements, row and column helpers."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ...turns import BLOCK_META_INFERENCE_ID, BLOCK_META_RESPONSE_ID, Block, Frozen, FrozenBlock, block_to_json
from .._store import TimedEvent, event_json
from ._dialect import Database, Dialect

__all__ = [
    "_SPANS",
    "_TIPS",
    "Operations",
    "_Tip",
    "_backoff",
    "_column_id",
    "_conditions",
    "_engine_of",
    "_event_rows",
    "_first_prompt",
    "_payload",
    "_usage_of",
    "_version_row",
]


@dataclass
class _Tip:
    """What a store knows of a session's latest snapshot, as this process last wrote or read it."""

    sk: int
    seq: int
    frozen: Frozen


class Operations(Protocol):
    """What the saving, loading and migrating functions use of the store they run in (a
    :class:`~geppetto.session.stores.SQLTurnStore`): its statements run on the operation's connection, its
    transactions, and what it remembers of each session's latest snapshot."""

    dialect: Dialect
    database: Database

    @property
    def location(self) -> str: ...

    @property
    def _tips(self) -> dict[str, _Tip]: ...

    @property
    def _marker(self) -> object: ...

    def _transaction(self, conn: Any) -> contextlib.AbstractContextManager[None]: ...

    def _rows(self, conn: Any, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...

    def _exec(self, conn: Any, statement: str, params: Sequence[Any] = ()) -> None: ...

    def _exec_many(self, conn: Any, statement: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def _ensure_session(self, conn: Any, session_id: str) -> None: ...

    def _vid(self, block: FrozenBlock, sk: int) -> int | None: ...

    def _sk(self, conn: Any, session_id: str) -> int: ...

    def _source(self, session_id: str) -> str: ...

    def _remember(self, session_id: str, tip: _Tip) -> None: ...

    def _store_blocks_once(self, conn: Any) -> None: ...

    def _summarize_sessions(self, conn: Any) -> None: ...


_SPANS = "SELECT p.position, p.vid, v.block FROM spans p JOIN block_versions v ON v.sk = p.sk AND v.vid = p.vid "

"""The spans of a session with the versions they hold; the caller adds the WHERE clause."""

_TIPS = 256

"""How many sessions' latest snapshots a store remembers (the most recently saved or read)."""


def _version_row(sk: int, vid: int, block: Block) -> tuple[Any, ...]:
    ids = (BLOCK_META_INFERENCE_ID.get(block.metadata), BLOCK_META_RESPONSE_ID.get(block.metadata))
    return (sk, vid, *(_column_id(v) for v in ids), block_to_json(block))


def _conditions(*tests: tuple[str, Any]) -> tuple[str, list[Any]]:
    """`` AND``-joined ``tests`` (a column and operator such as ``"seq >="``, and its value) for a WHERE
    clause, leaving out those whose value is None, and their parameters: ``(" AND seq >= ?", [3])``."""
    given = [(test, value) for test, value in tests if value is not None]
    return "".join(f" AND {test} ?" for test, _ in given), [value for _, value in given]


def _column_id(value: Any) -> str | None:
    """An id for the provenance columns: text PostgreSQL can hold (one with a NUL stays in the block's JSON
    only)."""
    return value if isinstance(value, str) and "\x00" not in value else None


def _first_prompt(blocks: Sequence[Block]) -> str:
    """The text of the first user block, for listings (a NUL, which PostgreSQL text cannot hold, shown as
    U+FFFD; the block itself keeps it, in its JSON)."""
    for block in blocks:
        if block.kind.value == "user":
            return block.text.replace("\x00", "\ufffd")
    return ""


def _backoff(seconds: float) -> Iterator[float]:
    """Pauses between attempts (0.05 s doubling to 2 s) until ``seconds`` from now have passed (an attempt
    under way then still ends: a connection's own timeout bounds it)."""
    deadline = time.monotonic() + seconds

    def pauses() -> Iterator[float]:
        delay = 0.05
        while time.monotonic() + delay <= deadline:
            yield delay
            delay = min(delay * 2, 2.0)

    return pauses()


def _event_rows(session_id: str, inference_id: str, events: Sequence[TimedEvent]) -> list[tuple[Any, ...]]:
    return [(session_id, inference_id, i, at, e.type, event_json(e)) for i, (at, e) in enumerate(events)]


def _engine_of(document: Any) -> tuple[str, str, str]:
    """Provider, model and Responses mode of a stored snapshot, from what the engine and the chat recorded
    in its metadata and data ("" where nothing says)."""
    doc = _payload(document)
    meta, data = _payload(doc.get("metadata")), _payload(doc.get("data"))
    chat = _payload(meta.get("geppetto.chat_engine@v1"))
    state = _payload(data.get("openai.responses_state@v1"))
    provider = chat.get("provider") or meta.get("geppetto.provider@v1") or ""
    model = chat.get("model") or meta.get("geppetto.model@v1") or ""
    mode = chat.get("mode") or state.get("mode") or ""
    return str(provider), str(model), str(mode)


def _usage_of(document: Any) -> dict[str, Any] | None:
    """The session usage totals a stored snapshot recorded (``geppetto.session_usage@v1``), if any."""
    usage = _payload(_payload(_payload(document).get("metadata")).get("geppetto.session_usage@v1"))
    return usage or None


def _payload(value: Any) -> dict[str, Any]:
    """A JSON column as a dict (PostgreSQL returns ``jsonb`` decoded, SQLite returns text; None: empty)."""
    data = json.loads(value) if isinstance(value, str | bytes) else value
    return data if isinstance(data, dict) else {}
