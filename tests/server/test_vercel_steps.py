"""The Vercel UI message stream puts a step's tool outputs inside that step, as the ``ai`` package's
``streamText`` does: start-step, tool input, tool output, finish-step, then the next step."""

from __future__ import annotations

from typing import Any

from geppetto.server._runner import RUN_FINISHED, RUN_STARTED
from geppetto.server.vercel import VercelStream


def _chunks(events: list[dict[str, Any]]) -> list[str]:
    stream = VercelStream("m1")
    return [c["type"] for e in events for c in stream.feed(e)]


def test_tool_outputs_arrive_inside_the_step_that_called_the_tools() -> None:
    events = [
        {"type": RUN_STARTED},
        {"type": "start"},
        {"type": "text_delta", "delta": "Checking."},
        {"type": "tool_call", "call_id": "c1", "name": "weather", "args": {"city": "Oslo"}},
        {"type": "tool_call", "call_id": "c2", "name": "weather", "args": {"city": "Rome"}},
        {"type": "final"},
        {"type": "tool_result", "call_id": "c1", "name": "weather", "result": "18C"},
        {"type": "tool_result", "call_id": "c2", "name": "weather", "error": "timeout"},
        {"type": "start"},
        {"type": "text_delta", "delta": "18C."},
        {"type": "final"},
        {"type": RUN_FINISHED, "status": "completed"},
    ]
    assert _chunks(events) == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "tool-input-available",
        "tool-input-available",
        "tool-output-available",
        "tool-output-error",
        "finish-step",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]


def test_a_step_whose_tool_outputs_never_come_still_ends() -> None:
    events = [
        {"type": RUN_STARTED},
        {"type": "start"},
        {"type": "tool_call", "call_id": "c1", "name": "weather", "args": {}},
        {"type": "final"},
        {"type": RUN_FINISHED, "status": "failed", "error": "cancelled"},
    ]
    assert _chunks(events) == ["start", "start-step", "tool-input-available", "finish-step", "error"]
