"""A session's tool calls that wait for a person or the client: listing, resuming and dropping them.

The waiting state is in the latest snapshot's ``tool_call`` blocks (``geppetto.approval@v1``), so it is
saved with it and a session restored in another process (or on another worker) sees the same calls.
Resuming continues the same Turn: a seed snapshot carrying the decisions, then an inference whose tool
loop runs the approved calls, answers the others and lets the model go on; its request chains from the
response that made the calls, like any tool step.

The checks here read a Turn (the session's latest) and the changes are functions ``Turn -> Turn`` on a
seed the session made; :class:`~geppetto.Session` adds the result to its history.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .._exceptions import UsageError
from ..tools import (
    ApprovalPendingError,
    PendingCall,
    apply_decisions,
    awaiting,
    drop_calls,
    has_unrun_decisions,
    pending_tool_calls,
)
from ..turns import Turn


class _Resumable(Protocol):
    """What :func:`prepare_resume` uses of a :class:`~geppetto.Session` (a protocol: the session module
    imports this one)."""

    def _resume_seed(self, decisions: Mapping[str, Any]) -> Turn: ...


__all__ = ["check_can_start", "check_drop", "check_no_waiting", "check_resume", "decided", "dropped", "prepare_resume"]


def _ids(calls: list[PendingCall]) -> str:
    return ", ".join(f"{c.call_id} ({c.name})" for c in calls)


def check_no_waiting(latest: Turn | None, session_id: str, action: str) -> bool:
    """Raise :class:`~geppetto.ApprovalPendingError` naming the fix when ``latest`` (a session's latest
    snapshot) has calls waiting for a decision that has not expired, or decided calls not yet answered.
    Returns whether some waiting calls expired (the caller refuses them with :func:`drop_calls` before
    going on)."""
    # the common case, no call left open, in one scan (awaiting and has_unrun_decisions would make two)
    if latest is None or not pending_tool_calls(latest):
        return False
    waiting = awaiting(latest)
    live = [c for c in waiting if not c.expired]
    if live:
        example = ", ".join(f"{c.call_id!r}: True" for c in live[:2])
        raise ApprovalPendingError(
            f"cannot {action}: session {session_id} has tool calls waiting for a decision: {_ids(live)}; "
            f"answer them with `await session.resume({{{example}}})` (True approves, False or a reason denies, "
            "a client-side tool takes its result) or refuse them all with `await session.drop_pending()`",
            calls=live,
        )
    if has_unrun_decisions(latest):
        raise ApprovalPendingError(
            f"cannot {action}: session {session_id} has decided tool calls that were not run yet; "
            "finish them with `await session.resume()`"
        )
    return bool(waiting)


def check_can_start(latest: Turn | None, session_id: str) -> None:
    """An inference may start when no call waits, or when some waiting call was decided (a resume):
    else :class:`~geppetto.ApprovalPendingError` naming the fix (the inference could only stop again)."""
    if latest is not None and pending_tool_calls(latest) and not has_unrun_decisions(latest):
        check_no_waiting(latest, session_id, "start an inference")


def check_resume(latest: Turn | None, decisions: object, session_id: str, *, has_tools: bool) -> None:
    """Raise :class:`~geppetto.UsageError` naming the fix when ``decisions`` cannot resume ``latest``."""
    if not isinstance(decisions, Mapping):
        raise UsageError(
            f"session.resume takes a mapping of call id to decision, e.g. {{'call_1': True}}, not {decisions!r}"
        )
    if latest is None or (not awaiting(latest) and not has_unrun_decisions(latest)):
        raise UsageError(
            f"session {session_id} has no tool call waiting for a decision; "
            "start the next turn with session.prompt(text) or session.run(text)"
        )
    if not has_tools:
        raise UsageError(
            "this session has no tools to run the approved calls with: restore it with the same tools, "
            "e.g. Session.restore(engine, store, session_id, tools=[...])"
        )


def decided(seed: Turn, decisions: Mapping[str, Any]) -> Turn:
    """``seed`` (the latest snapshot going on, under its Turn id) carrying ``decisions`` (checked there: a
    :class:`~geppetto.UsageError` for an id that does not wait or a decision of the wrong type)."""
    apply_decisions(seed, decisions)
    return seed


def check_drop(latest: Turn | None, session_id: str) -> None:
    """Raise :class:`~geppetto.UsageError` when nothing in ``latest`` waits to be dropped."""
    if latest is None or not awaiting(latest):
        raise UsageError(f"session {session_id} has no tool call waiting for a decision to drop")


def dropped(seed: Turn, reason: str) -> Turn:
    """``seed`` with every waiting call refused (the model reads that it was dropped, with ``reason``)."""
    drop_calls(seed, reason)
    return seed


def prepare_resume(session: _Resumable, decisions: Mapping[str, Any]) -> Turn:
    """Check ``decisions`` and add the seed snapshot that carries them to ``session`` (the same Turn, going
    on); the caller starts the inference (``session.start_inference()``). Nothing changes when they are
    refused. The server's entry to :meth:`Session.resume <geppetto.Session.resume>`'s first half."""
    return session._resume_seed(decisions)
