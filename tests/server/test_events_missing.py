"""An ``events_missing`` notice (events the bus lost) reaches the protocol streams where the gap is."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("ag_ui")

from geppetto.server import agui, vercel
from geppetto.server._publish import missing_notice

NOTICE = {**missing_notice("s1", "inf-1", 7), "type": "events_missing"}
WANTED = {"inference_id": "inf-1", "count": 7, "log": "/api/sessions/s1/inspect"}


def test_ag_ui_gets_a_custom_event() -> None:
    stream = agui.AGUIStream("s1", "run-1", None)
    [event] = stream.feed(NOTICE)
    encoded = json.loads(stream.encode([event]).removeprefix("data: ").strip())
    assert encoded["type"] == "CUSTOM" and encoded["name"] == "events_missing"
    assert WANTED.items() <= encoded["value"].items()


def test_the_vercel_stream_gets_a_data_part() -> None:
    [part] = vercel.VercelStream().feed(NOTICE)
    assert part["type"] == "data-events-missing" and WANTED.items() <= part["data"].items()
