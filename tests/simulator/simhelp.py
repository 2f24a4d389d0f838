"""Shared helpers for the simulator tests."""

from __future__ import annotations

import json
from typing import Any

WEATHER_FUNCTION = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
"""The weather function as the Interactions API declares a tool."""
WEATHER_TOOL = {**WEATHER_FUNCTION, "strict": None}
"""The weather function as the Responses API declares a tool."""


def sse_events(text: str) -> list[tuple[str | None, Any]]:
    """Parse an SSE body into (event name, parsed data) pairs; `[DONE]` stays a string."""
    events: list[tuple[str | None, Any]] = []
    for block in text.strip().split("\n\n"):
        name = None
        data = None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                raw = line[6:]
                data = raw if raw == "[DONE]" else json.loads(raw)
        events.append((name, data))
    return events
