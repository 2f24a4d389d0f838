"""Error texts in the reader's own terms: a library user reads how to fix something as a Python call
(``await session.resume({...})``, ``session.limits = UsageLimits(...)``); a command-line user reads the flag
and an HTTP client the route. The exceptions keep the Python wording; the command line and the server
translate what they show with :func:`for_cli` and :func:`for_http`."""

from __future__ import annotations

import json
import re

__all__ = ["for_cli", "for_http"]

_RESUME = re.compile(r"`await session\.resume\(\{(?P<example>[^`]*)\}\)`")
_DROP = re.compile(r" or refuse them all with `await session\.drop_pending\(\)`")
_FINISH = re.compile(r"`await session\.resume\(\)`")
_LIMITS = re.compile(r"\(?session\.limits = UsageLimits\((?P<limit>\w+)=\.\.\.\)\)?")
# Where a library user finds the work done so far; an HTTP client or a command-line user has no error object.
_ERROR_TURN = re.compile(r" and the Turn \(error\.turn\) keeps the work done so far")
_HOW = re.compile(r" \(True approves, False or a reason denies, a client-side tool takes its result\)")
_NEXT_TURN = re.compile(r"start the next turn with session\.prompt\(text\) or session\.run\(text\)")
_DECISION = re.compile(r"must be True \(approve\), False \(deny\)")
_EXAMPLE = re.compile(r"'(?P<id>[^']*)': (?P<value>True|False)")
# A turn file's reader is told to load it leniently, which only a Python caller can do.
_LENIENT = re.compile(
    r",? or load with strict=False to (?:skip unknown fields|read it as 'other')|\(or load with strict=False[^)]*\) ?"
)


def _decisions(example: str) -> str:
    """``'call_1': True, 'call_2': True`` (the Python example) as the JSON an approvals request takes."""
    pairs = {m["id"]: m["value"] == "True" for m in _EXAMPLE.finditer(example)} or {"<call_id>": True}
    return json.dumps({"decisions": pairs})


def for_http(text: str, session_id: str | None = None) -> str:
    """``text`` as an HTTP client (and the web chat) reads it: routes instead of Python calls."""
    route = f"POST /api/sessions/{session_id or '{id}'}/approvals"
    text = _RESUME.sub(lambda m: f"{route} with {_decisions(m['example'])}", text)
    text = _HOW.sub(
        " (true approves, false or a reason denies, a client-side tool takes its result; in the web chat: "
        "Approve or Deny on the call's card)",
        text,
    )
    text = _DROP.sub(" or deny each one with false", text)
    text = _FINISH.sub(f"{route} with their decisions", text)
    text = _NEXT_TURN.sub(f"send the next prompt with POST /api/sessions/{session_id or '{id}'}/messages", text)
    text = _DECISION.sub("must be true (approve), false (deny)", text)
    text = _LIMITS.sub(lambda m: f"(the server's limits: geppetto serve --limits {m['limit']}=<more>)", text)
    return _ERROR_TURN.sub("", text)


def for_cli(text: str) -> str:
    """``text`` as a command-line user reads it: flags instead of Python calls."""
    text = _LIMITS.sub(lambda m: f"(--limits {m['limit']}=<more>)", text)
    text = _ERROR_TURN.sub("", text)
    text = _RESUME.sub("y or n when geppetto chat asks, or --yes to allow every call", text)
    text = _HOW.sub("", text)
    text = _DROP.sub("", text)
    text = _LENIENT.sub("", text)
    return _FINISH.sub("the next prompt in geppetto chat", text)
