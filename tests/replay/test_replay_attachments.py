"""The simulator's attachment checks accept every attachment in the genuine recorded requests the services
accepted (documents, text, images, video and audio; inline, by URL, ``gs://``, proto field spellings), and
its descriptions name each one."""

from __future__ import annotations

from typing import Any

import pytest

from geppetto.simulator._attachments import (
    chat_files,
    check_chat_files,
    check_claude_files,
    check_gemini_files,
    check_responses_files,
    claude_files,
    gemini_files,
    responses_files,
)
from recorded import MISSING, ROOT, Exchange, exchanges

pytestmark = pytest.mark.skipif(not ROOT.is_dir(), reason=MISSING)


def _described(exchange: Exchange) -> list[str]:
    """Check the request's attachments as the simulator does; the descriptions of those it carries."""
    body: dict[str, Any] = exchange.body
    if exchange.api == "gemini":
        check_gemini_files(body.get("contents") or [])
        parts = [p for c in body.get("contents") or [] if c.get("role") != "model" for p in c.get("parts") or []]
        return [m.text for p in parts for m in gemini_files(p)]
    users = [
        m for m in body.get("messages") or body.get("input") or [] if isinstance(m, dict) and m.get("role") == "user"
    ]
    if exchange.api == "anthropic":
        check_claude_files(body.get("messages") or [])
        return [m.text for u in users for m in claude_files(u.get("content"))]
    if exchange.api == "chat":
        check_chat_files(body.get("messages") or [], str(body.get("model") or ""))
        return [m.text for u in users for m in chat_files(u.get("content"))]
    check_responses_files(body.get("input"))
    return [m.text for u in users for m in responses_files(u.get("content"))]


_MARKERS = {
    "gemini": ("'inlineData'", "'inline_data'", "'fileData'", "'file_data'"),
    "anthropic": ("'type': 'document'", "'type': 'image'"),
    "chat": ("'type': 'image_url'", "'type': 'file'", "'type': 'input_audio'"),
    "responses": ("'type': 'input_image'", "'type': 'input_file'"),
}
"""How each API marks one attachment in a request (as Python's repr of the body shows it)."""


def _with_files() -> list[Exchange]:
    keys = ("inlineData", "inline_data", "fileData", "file_data", '"document"', "input_file", "input_audio", "image")
    found = []
    for exchange in (e for e in exchanges() if e.generation) if ROOT.is_dir() else []:
        if exchange.status < 400 and any(k in str(exchange.body).replace("'", '"') for k in keys):
            found.append(exchange)
    return found


@pytest.mark.parametrize("exchange", _with_files(), ids=lambda e: e.name)
def test_recorded_attachments_pass_the_checks_and_are_named(exchange: Exchange) -> None:
    described = _described(exchange)
    text = str(exchange.body)
    expected = sum(text.count(marker) for marker in _MARKERS[exchange.api])
    assert len(described) == expected, described
    assert all(d.strip() for d in described)


def test_the_recordings_hold_attachments_of_every_kind() -> None:
    found = _with_files()
    assert {e.api for e in found} >= {"gemini", "responses", "anthropic"}
    kinds = " ".join(d for e in found for d in _described(e))
    for kind in ("application/pdf", "text/plain", "video/mp4", "image/jpeg", "gs://"):
        assert kind in kinds, kind
