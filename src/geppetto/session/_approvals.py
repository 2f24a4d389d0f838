"""A session's tool calls that wait for a person or the client: listing, resuming and dropping them.

The waiting state is in the latest snapshot's ``tool_call`` blocks (``geppetto.approval@v1``), so it is
saved with it and a session restored in another process (or on another worker) sees the same calls.
Resuming continues the same Turn: a seed snapshot carrying the decisions, then an inference whose tool
loop runs the approved calls, answers the others and lets the model go on; its request chains from the
response that made the calls, like any tool step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .._exceptions import UsageError
from ..tools._approval import (
    ApprovalPendingError,
    PendingCall,
    apply_decisions,
    awaiting,
    drop_calls,
    has_unrun_decisions,
)
from ..tools._pending import pending_tool_calls
from ..turns import Turn


class _Handle(Protocol):
    async def wait(self) -> Turn: ...


class Session(Protocol):
    """What this module uses of a :class:`~geppetto.Session` (a protocol: the session module imports this one)."""

    session_id: str
    tools: Any

    @property
    def latest(self) -> Turn | None: ...
    def _check_idle(self, action: str) -> None: ...
    def _continued(self) -> Turn: ...
    def _push(self, turn: Turn) -> None: ...
    async def _complete(self, out: Turn, events: Any) -> None: ...
    def start_inference(self, *, inference_id: str | None = None) -> _Handle: ...


__all__ = ["check_can_start", "check_no_waiting", "drop_pending", "prepare_resume", "resume"]


def _ids(calls: list[PendingCall]) -> str:
    return ", ".join(f"{c.call_id} ({c.name})" for c in calls)


def check_no_waiting(session: Session, action: str) -> bool:
    """Raise :class:`~geppetto.ApprovalPendingError` naming the fix when the latest snapshot has calls
    waiting for a decision that has not expired, or decided calls not yet answered. Returns whether some
    waiting calls expired (the caller refuses them with :func:`drop_calls` before going on)."""
    latest = session.latest
    # the common case, no call left open, in one scan (awaiting and has_unrun_decisions would make two)
    if latest is None or not pending_tool_calls(latest):
        return False
    waiting = awaiting(latest)
    live = [c for c in waiting if not c.expired]
    if live:
        example = ", ".join(f"{c.call_id!r}: True" for c in live[:2])
        raise ApprovalPendingError(
            f"cannot {action}: session {session.session_id} has tool calls waiting for a decision: {_ids(live)}; "
            f"answer them with `await session.resume({{{example}}})` (True approves, False or a reason denies, "
            "a client-side tool takes its result) or refuse them all with `await session.drop_pending()`",
            calls=live,
        )
    if has_unrun_decisions(latest):
        raise ApprovalPendingError(
            f"cannot {action}: session {session.session_id} has decided tool calls that were not run yet; "
            "finish them with `await session.resume()`"
        )
    return bool(waiting)


def check_can_start(session: Session) -> None:
    """An inference may start when no call waits, or when some waiting call was decided (a resume):
    else :class:`~geppetto.ApprovalPendingError` naming the fix (the inference could only stop again)."""
    latest = session.latest
    if latest is not None and pending_tool_calls(latest) and not has_unrun_decisions(latest):
        check_no_waiting(session, "start an inference")


async def resume(session: Session, decisions: Mapping[str, Any]) -> Turn:
    """See :meth:`Session.resume <geppetto.Session.resume>`."""
    prepare_resume(session, decisions)
    return await session.start_inference().wait()


def prepare_resume(session: Session, decisions: Mapping[str, Any]) -> Turn:
    """Check ``decisions`` and add the seed snapshot that carries them (the same Turn, going on); the
    caller starts the inference (``session.start_inference()``). Nothing changes when they are refused."""
    session._check_idle("resume")
    if not isinstance(decisions, Mapping):
        raise UsageError(
            f"session.resume takes a mapping of call id to decision, e.g. {{'call_1': True}}, not {decisions!r}"
        )
    latest = session.latest
    if latest is None or (not awaiting(latest) and not has_unrun_decisions(latest)):
        raise UsageError(
            f"session {session.session_id} has no tool call waiting for a decision; "
            "start the next turn with session.prompt(text) or session.run(text)"
        )
    if session.tools is None:
        raise UsageError(
            "this session has no tools to run the approved calls with: restore it with the same tools, "
            "e.g. Session.restore(engine, store, session_id, tools=[...])"
        )
    seed = session._continued()
    apply_decisions(seed, decisions)
    session._push(seed)
    return seed


async def drop_pending(session: Session, reason: str = "") -> Turn:
    """See :meth:`Session.drop_pending <geppetto.Session.drop_pending>`."""
    session._check_idle("drop pending tool calls")
    latest = session.latest
    if latest is None or not awaiting(latest):
        raise UsageError(f"session {session.session_id} has no tool call waiting for a decision to drop")
    out = session._continued()
    drop_calls(out, reason)
    await session._complete(out, None)
    return out
