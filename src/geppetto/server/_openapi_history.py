"""The OpenAPI entries of the history-edit routes (rewind, fork)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["history_paths"]


def history_paths(
    session_param: dict[str, Any],
    session_id: dict[str, Any],
    errors: dict[str, Any],
    answer: Callable[[str, dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """``POST /api/sessions/{id}/rewind`` and ``/fork``, built from the document's pieces: the path parameter,
    the session id schema, the error answers and the maker of a JSON answer (``_openapi`` passes them)."""
    return {
        "/api/sessions/{session_id}/rewind": {
            "parameters": [session_param],
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
                    "200": answer(
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
                    **errors,
                },
            },
        },
        "/api/sessions/{session_id}/fork": {
            "parameters": [session_param],
            "post": {
                "summary": "A new session (`id`, else a fresh one) with this session's settings, sharing its "
                "history so far; each goes on on its own",
                "requestBody": {
                    "required": False,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {"id": session_id},
                                "additionalProperties": False,
                            }
                        }
                    },
                },
                "responses": {
                    "201": answer(
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
                    **errors,
                },
            },
        },
    }
