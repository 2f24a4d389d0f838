"""Hosted (built-in) tool output items typed for users: what each call was and what it found.

The raw item stays the block's ``payload["item"]`` and is what goes back; ``payload["builtin"]`` (see
:mod:`geppetto.turns._builtin`) says which tool it was, its input and its sources in one vocabulary
with Claude's and Gemini's built-in tools. A hosted call item is both the call and its result.
"""

from __future__ import annotations

from typing import Any

from geppetto.turns import BuiltinTool

__all__ = ["builtin_of_item"]

_TOOLS = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_execution",
    "image_generation_call": "image_generation",
    "mcp_call": "mcp",
    "mcp_list_tools": "mcp",
    "local_shell_call": "shell",
}


def _input(item: dict[str, Any]) -> Any:
    kind = item.get("type")
    if kind == "web_search_call":
        return item.get("action")
    if kind == "file_search_call":
        return item.get("queries")
    if kind == "code_interpreter_call":
        return item.get("code")
    if kind == "mcp_call":
        return item.get("arguments")
    return None


def _sources(item: dict[str, Any]) -> list[dict[str, Any]]:
    action = item.get("action")
    found = (action.get("sources") if isinstance(action, dict) else None) or item.get("results") or []
    return [
        {"url": str(s.get("url") or s.get("filename") or ""), "title": str(s.get("title") or s.get("filename") or "")}
        for s in found
        if isinstance(s, dict)
    ]


def builtin_of_item(item: dict[str, Any]) -> BuiltinTool | None:
    """The hosted tool call an output item is, else None."""
    tool = _TOOLS.get(str(item.get("type") or ""))
    if tool is None:
        return None
    info = BuiltinTool(tool=tool, phase="call", call_id=str(item.get("id") or ""))
    if item.get("name") or item.get("server_label"):
        info["name"] = str(item.get("name") or item.get("server_label"))
    value = _input(item)
    if value is not None:
        info["input"] = value
    output = item.get("output") if item.get("type") == "mcp_call" else item.get("outputs")
    if output is not None:
        info["output"] = output
    if item.get("error") or item.get("status") == "failed":
        info["error"] = True
    sources = _sources(item)
    if sources:
        info["sources"] = sources
    return info
