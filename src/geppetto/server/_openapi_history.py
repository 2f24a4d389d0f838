"""The OpenAPI entries of the history-edit routes (rewind, fork)."""

from __future__ import annotations

from typing import Any

from ._openapi import _ERRORS, _SESSION_ID, SESSION_ID, _json

__all__ = ["history_paths"]


def history_paths() -> dict[str, Any]:
    """``POST /api/sessions/{id}/rewind`` and ``/fork``."""
    return {
        "/api/sessions/{session_id}/rewind": {
            "parameters": [_SESSION_ID],
            "post": {
                "summary": "Drop the last n prompts with their answers (n defaults to 1): a new latest snapshot, "
                "saved; the next request re-anchors on the latest response still in it",
                "requestBody": {
                    "required": False,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {"n": {"type": "integer", "minimum": 1}},
                                "additionalProperties": False,
                            }
                        }
                    },
                },
                "responses": {
                    "200": _json(
                        "Rewound",
                        {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string"},
                                "rewound": {"type": "integer"},
                                "turn_id": {"type": "string"},
                                "blocks": {"type": "integer"},
                            },
                        },
                    ),
                    **_ERRORS,
                },
            },
        },
        "/api/sessions/{session_id}/fork": {
            "parameters": [_SESSION_ID],
            "post": {
                "summary": "A new session (`id`, else a fresh one) with this session's settings, sharing its "
                "history so far; each goes on on its own",
                "requestBody": {
                    "required": False,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {"id": SESSION_ID},
                                "additionalProperties": False,
                            }
                        }
                    },
                },
                "responses": {
                    "201": _json(
                        "Forked",
                        {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string"},
                                "from": {"type": "string"},
                                "settings": {"type": "object"},
                                "blocks": {"type": "integer"},
                            },
                        },
                    ),
                    **_ERRORS,
                },
            },
        },
    }
