"""Provider built-in tool events (``builtin_tool``: the provider ran a web search, code, an MCP tool) as the
protocol streams show them: an id that pairs each call with its result, and the sources a result found.

A provider may send a call with no id (Gemini's code execution) or a call with no separate result (a
Responses ``web_search_call`` item holds the whole call): a result without an id answers the earliest open
call of its tool, and the calls still open when the provider call ends are answered with no output."""

from __future__ import annotations

from typing import Any

from ..turns import new_id

__all__ = ["BuiltinCalls", "as_citations", "is_url", "sources"]


def sources(event: dict[str, Any]) -> list[dict[str, Any]]:
    """The sources a built-in result found (``{"url", "title"}`` each; entries without a ``url`` left out)."""
    found = event.get("sources")
    return [s for s in found if isinstance(s, dict) and s.get("url")] if isinstance(found, list) else []


def is_url(value: Any) -> bool:
    """Whether a source's ``url`` is a web address (else a provider's file id, a document)."""
    return isinstance(value, str) and value.startswith(("http://", "https://"))


def as_citations(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A result's sources in the form of the answer's citations (``citations`` events): ``url`` for a web
    address, ``document`` for a provider's file id."""
    return [
        {"url" if is_url(s["url"]) else "document": str(s["url"]), **({"title": s["title"]} if s.get("title") else {})}
        for s in found
    ]


class BuiltinCalls:
    """The built-in calls of one stream whose results have not arrived, by the id the stream gave them."""

    def __init__(self) -> None:
        self._open: dict[str, str] = {}  # id -> tool, in the order the calls came

    def call(self, event: dict[str, Any]) -> str:
        """The id of a ``builtin_tool`` call event (the provider's, else a new one)."""
        call_id = str(event.get("call_id") or "") or new_id()
        self._open[call_id] = str(event.get("tool") or "")
        return call_id

    def result(self, event: dict[str, Any]) -> tuple[str, bool]:
        """The id of the call a ``builtin_tool`` result answers, and whether that call was seen (when not, the
        stream announces the call before its result)."""
        call_id = str(event.get("call_id") or "")
        if call_id:
            return call_id, self._open.pop(call_id, None) is not None
        tool = str(event.get("tool") or "")
        for open_id, open_tool in self._open.items():
            if open_tool == tool:
                del self._open[open_id]  # the loop ends here
                return open_id, True
        return new_id(), False

    def unanswered(self) -> list[str]:
        """The ids of the calls still open, which are then closed."""
        ids = list(self._open)
        self._open.clear()
        return ids
