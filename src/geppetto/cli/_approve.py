"""Asking at the terminal about tool calls that wait for approval (``geppetto chat``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..tools import PendingCall, ToolReportedError

__all__ = ["ask_approvals", "decision_for"]

_YES = ("y", "yes")
_NO = ("", "n", "no")


def decision_for(answer: str) -> bool | str:
    """What a typed answer decides: y/yes approves, n/no/Enter denies, any other text denies with it as
    the reason the model reads."""
    text = answer.strip()
    if text.lower() in _YES:
        return True
    if text.lower() in _NO:
        return False
    return text


def _describe(call: PendingCall) -> str:
    args = call.arguments
    shown = json.dumps(args, ensure_ascii=False) if not isinstance(args, str) else args
    if len(shown) > 200:
        shown = shown[:200] + "…"
    return f"{call.name}({shown})"


def ask_approvals(calls: Sequence[PendingCall]) -> dict[str, Any] | None:
    """Ask about each waiting call on stdin; ``None`` when the person pressed Ctrl-C or closed the input
    (the caller drops the calls). A client-side call cannot run in a terminal: it is answered with an error."""
    decisions: dict[str, Any] = {}
    for call in calls:
        if call.kind == "client":
            print(f"\n{_describe(call)} runs in a client, which this terminal is not; the model is told so")
            decisions[call.call_id] = ToolReportedError("this client-side tool is not available in geppetto chat")
            continue
        try:
            answer = input(f"run {_describe(call)}? [y/N, or a reason to deny] ")
        except (EOFError, KeyboardInterrupt):
            print()
            return None
        decisions[call.call_id] = decision_for(answer)
    return decisions
