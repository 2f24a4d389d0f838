"""Where a session's turn snapshots are kept: the ``TurnStore`` protocol and an in-memory store."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..turns import Turn

__all__ = ["MemoryTurnStore", "TurnStore"]


@runtime_checkable
class TurnStore(Protocol):
    """Persistence for session histories. A session calls :meth:`save_snapshot` after every completed
    inference with the output turn; stores keep snapshots in the order they were saved."""

    async def save_snapshot(self, session_id: str, turn: Turn) -> None: ...

    async def load_session(self, session_id: str) -> list[Turn]:
        """The snapshots saved for ``session_id``, oldest first (empty when unknown)."""
        ...

    async def list_sessions(self) -> list[str]:
        """Every session id with at least one snapshot, in the order first saved."""
        ...


class MemoryTurnStore:
    """A :class:`TurnStore` in a dict: for tests and short-lived processes. Stores and returns copies."""

    def __init__(self) -> None:
        self._sessions: dict[str, list[Turn]] = {}

    async def save_snapshot(self, session_id: str, turn: Turn) -> None:
        self._sessions.setdefault(session_id, []).append(turn.clone())

    async def load_session(self, session_id: str) -> list[Turn]:
        return [t.clone() for t in self._sessions.get(session_id, [])]

    async def list_sessions(self) -> list[str]:
        return list(self._sessions)
