"""Claude's server tools as typed definitions for ``ClaudeEngine(builtin_tools=[...])``.

Each helper returns Claude's own tool definition (any other, newer one can be passed as a dict too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["code_execution", "web_fetch", "web_search"]


def _limits(
    out: dict[str, Any], max_uses: int | None, allowed: Sequence[str] | None, blocked: Sequence[str] | None
) -> dict[str, Any]:
    if max_uses is not None:
        out["max_uses"] = max_uses
    if allowed:
        out["allowed_domains"] = list(allowed)
    if blocked:
        out["blocked_domains"] = list(blocked)
    return out


def web_search(
    *,
    max_uses: int | None = None,
    allowed_domains: Sequence[str] | None = None,
    blocked_domains: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Claude's web search (``web_search_20250305``); its results and citations come back in the Turn."""
    return _limits({"type": "web_search_20250305", "name": "web_search"}, max_uses, allowed_domains, blocked_domains)


def web_fetch(
    *,
    max_uses: int | None = None,
    allowed_domains: Sequence[str] | None = None,
    blocked_domains: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Claude's web fetch (``web_fetch_20250910``); Anthropic asks for its beta header
    (``headers={"anthropic-beta": "web-fetch-2025-09-10"}``)."""
    return _limits({"type": "web_fetch_20250910", "name": "web_fetch"}, max_uses, allowed_domains, blocked_domains)


def code_execution() -> dict[str, Any]:
    """Claude's code execution in a sandbox (``code_execution_20250825``)."""
    return {"type": "code_execution_20250825", "name": "code_execution"}
