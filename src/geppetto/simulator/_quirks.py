"""Quirks: how third-party Responses servers depart from OpenAI's, reproduced on demand (docs/simulator.md).

Each quirk changes what the Responses API (``/v1/responses...``; ``/v1/conversations...`` for
``detail-errors`` and ``no-conversations``) answers; the other APIs stay faithful. With no quirk the
simulator answers as OpenAI does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

QUIRKS: dict[str, str] = {
    "no-echo": "answers carry no previous_response_id field",
    "null-echo": "answers carry previous_response_id: null",
    "foreign-echo": "answers echo an id other than the one sent (the upstream id a proxy got back)",
    "forgets": "previous_response_id is accepted but the model sees the new input alone (fresh id, no echo)",
    "detail-errors": 'errors come as {"detail": "..."} instead of OpenAI\'s error envelope',
    "untyped-stream-errors": 'a streaming request\'s error comes as HTTP 200 and a data event {"error": {...}} '
    "without a type field",
    "no-conversations": "every /v1/conversations route answers 404",
    "no-usage": "answers carry no usage",
    "no-item-events": "streams carry no output_item (or content_part) events: response.created, the text "
    "deltas and the terminal event only",
    "done-marker": "streams end with a data: [DONE] line after the terminal event",
}
"""Every quirk name and what it does."""

_STATE_PATHS = ("/v1/responses", "/v1/conversations")


class QuirkError(ValueError):
    """An unknown quirk name (the message lists the valid ones)."""


def parse_quirks(names: str | Iterable[str] | None) -> frozenset[str]:
    """The quirk names in ``names`` (a comma-separated string or an iterable of names; None for none).

    Raises QuirkError naming the unknown ones and listing the valid ones."""
    if names is None:
        return frozenset()
    parts = names.split(",") if isinstance(names, str) else list(names)
    chosen = frozenset(str(p).strip() for p in parts if str(p).strip())
    unknown = sorted(chosen - QUIRKS.keys())
    if unknown:
        raise QuirkError(f"unknown quirk {', '.join(map(repr, unknown))}; valid quirks: {', '.join(QUIRKS)}")
    return chosen


def foreign_id(response_id: str) -> str:
    """The id a ``foreign-echo`` server echoes for ``response_id``: stable, valid, and never the same."""
    return "resp_" + hashlib.sha256(b"upstream:" + response_id.encode()).hexdigest()[:32]


def shape_response(quirks: frozenset[str], obj: dict[str, Any], sent: str | None) -> None:
    """Apply the answer-shape quirks to a response object in place (``sent``: the previous_response_id the
    request carried)."""
    if "forgets" in quirks or "null-echo" in quirks:
        obj["previous_response_id"] = None
    if "foreign-echo" in quirks and sent:
        obj["previous_response_id"] = foreign_id(sent)
    if "no-echo" in quirks:
        obj.pop("previous_response_id", None)
    if "no-usage" in quirks:
        obj.pop("usage", None)


def shapes_path(path: str) -> bool:
    """Whether ``path`` is one the state and error quirks apply to (the Responses and Conversations APIs)."""
    return path.startswith(_STATE_PATHS)


def detail_body(message: str) -> dict[str, Any]:
    """The body a ``detail-errors`` server answers an error with (FastAPI's shape)."""
    return {"detail": message}


def untyped_error_frame(message: str) -> bytes:
    """The error event of an ``untyped-stream-errors`` server: a data line, no event line, no type."""
    return b"data: " + json.dumps({"error": {"message": message}}, separators=(",", ":")).encode() + b"\n\n"


DONE_FRAME = b"data: [DONE]\n\n"

_ITEM_KINDS = ("response.created", "response.output_text.delta", "response.completed", "response.incomplete")


def keeps_event(quirks: frozenset[str], kind: str) -> bool:
    """Whether a stream under ``quirks`` carries an event of type ``kind``."""
    return "no-item-events" not in quirks or kind in _ITEM_KINDS
