"""Gemini's built-in tools as typed definitions for ``GeminiEngine(builtin_tools=[...])``.

Each helper returns Gemini's own tool entry (any other one can be passed as a dict too).
"""

from __future__ import annotations

from typing import Any

__all__ = ["code_execution", "google_search", "url_context"]


def google_search() -> dict[str, Any]:
    """Grounding with Google Search; the sources come back as the answer's ``citations``."""
    return {"googleSearch": {}}


def code_execution() -> dict[str, Any]:
    """Python run by Gemini; the code and its result come back as ``other`` blocks."""
    return {"codeExecution": {}}


def url_context() -> dict[str, Any]:
    """Gemini reads the URLs in the prompt."""
    return {"urlContext": {}}
