"""History edits through the server: rewind a session, or fork it into a new one (thin over ``Session``).

Each holds the session's lease while it edits (no inference can start meanwhile, in any worker), loads
the session as an inference would, and lets :meth:`Session.rewind` / :meth:`Session.fork` save the new
snapshot; a fork is made with its origin's settings.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .._exceptions import UsageError
from ..session import Session
from ..turns import new_id

if TYPE_CHECKING:
    from ._runner import Runner

__all__ = ["fork_session", "rewind_session"]

T = TypeVar("T")


async def _edit(runner: Runner, session_id: str, change: Callable[[Session, dict[str, Any]], Awaitable[T]]) -> T:
    settings = await runner.settings(session_id)
    lease = await runner._try_lock(
        session_id, f"wait for it to finish or POST /api/sessions/{session_id}/cancel, then edit its history"
    )
    try:
        session = await runner._session(session_id, settings, lambda event: None)
        if session.latest is None:
            raise UsageError(
                f"session {session_id} has no snapshot yet; POST /api/sessions/{session_id}/messages first"
            )
        result = await change(session, settings)
        await runner._keep_hot(session_id, settings, session)
        return result
    finally:
        await lease.release()


async def rewind_session(runner: Runner, session_id: str, n: int) -> dict[str, Any]:
    """Drop the last ``n`` prompts of ``session_id`` with their answers; the new latest snapshot's summary."""

    async def rewind(session: Session, _settings: dict[str, Any]) -> dict[str, Any]:
        turn = await session.rewind(n)
        return {"id": session_id, "rewound": n, "turn_id": turn.id, "blocks": len(turn.blocks)}

    return await _edit(runner, session_id, rewind)


async def fork_session(runner: Runner, session_id: str, fork_id: str | None) -> dict[str, Any]:
    """A new session (``fork_id`` or a fresh id, with ``session_id``'s settings) sharing its history so far."""
    child = fork_id or new_id()

    async def fork(session: Session, settings: dict[str, Any]) -> dict[str, Any]:
        await runner.store.create_session(child, settings)  # UsageError when the id is taken
        forked = await session.fork(session_id=child)
        latest = forked.latest
        assert latest is not None
        return {"id": child, "from": session_id, "settings": settings, "blocks": len(latest.blocks)}

    return await _edit(runner, session_id, fork)
