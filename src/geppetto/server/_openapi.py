"""The OpenAPI 3.1 document of the server's API, served at ``/openapi.json``."""

from __future__ import annotations

from typing import Any

from ._openapi_history import history_paths

__all__ = ["openapi_document"]


def _error() -> dict[str, Any]:
    return {
        "description": "An error: what went wrong and how to fix it",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_SSE_EVENT = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "event": {"type": "string"}, "data": {"type": "string"}},
}
_SSE = {"description": "Server-Sent Events", "content": {"text/event-stream": {"schema": _SSE_EVENT}}}
_ERRORS = {str(code): _error() for code in (400, 401, 403, 404, 405, 409, 413, 415, 421, 422, 503)}

_STARTED = _json(
    "Started; read its events after `after`",
    {
        "type": "object",
        "properties": {"inference_id": {"type": "string"}, "after": {"type": "string"}, "events": {"type": "string"}},
    },
)
"""The answer of a route that starts an inference (a prompt, or the answers to waiting tool calls)."""

# What the server accepts as text: no NUL (PostgreSQL cannot store it; lone surrogates, which JSON can
# carry as escapes, are refused too but cannot be written as a pattern), and for ids and prompts some
# non-blank character.
TEXT = {"type": "string", "pattern": "^[^\\u0000]*$"}
NON_BLANK = {"type": "string", "pattern": "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"}
SESSION_ID = {**NON_BLANK, "maxLength": 200}  # _app.MAX_ID
FILES = {
    "type": "array",
    "description": "Attachments: a media type and one of base64 data, a URL or a provider file id",
    "items": {
        "type": "object",
        "required": ["media_type"],
        "properties": {
            "media_type": {"type": "string"},
            "data": {"type": "string", "contentEncoding": "base64"},
            "url": {"type": "string"},
            "file_id": {"type": "string"},
            "filename": {"type": "string"},
        },
    },
}
_SESSION_ID = {"name": "session_id", "in": "path", "required": True, "schema": SESSION_ID}


def _text_part() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["type", "text"],
        "properties": {"type": {"const": "text"}, "text": NON_BLANK},
    }


def _chat_request() -> dict[str, Any]:
    """What ``useChat`` sends: the chat id and its messages; every user message has some text (the last one
    is the prompt)."""
    user_with_text = {
        "if": {"required": ["role"], "properties": {"role": {"const": "user"}}},
        "then": {"required": ["parts"], "properties": {"parts": {"contains": _text_part()}}},
    }
    message = {
        "type": "object",
        "required": ["role"],
        "properties": {
            "id": TEXT,
            "role": {"type": "string", "enum": ["system", "user", "assistant"]},
            "parts": {"type": "array", "items": {"type": "object", "properties": {"type": TEXT, "text": TEXT}}},
        },
        **user_with_text,
    }
    return {
        "type": "object",
        "required": ["id", "messages"],
        "properties": {
            "id": {**SESSION_ID, "description": "the chat id: the session (made on first use)"},
            "messages": {
                "type": "array",
                "items": message,
                "contains": {"required": ["role"], "properties": {"role": {"const": "user"}}},
            },
        },
    }


def _named(*fields: str) -> dict[str, Any]:
    return {"type": "object", "required": list(fields), "properties": {f: {"type": "string"} for f in fields}}


def _run_agent_input() -> dict[str, Any]:
    """AG-UI's ``RunAgentInput``: what the server reads of it (the package's own types check the rest)."""
    message = {
        "type": "object",
        "required": ["id", "role"],
        "properties": {
            "id": TEXT,
            "role": {"type": "string", "enum": ["developer", "system", "assistant", "user"]},
            "content": TEXT,
        },
        "allOf": [
            {
                "if": {"required": ["role"], "properties": {"role": {"const": "user"}}},
                "then": {"required": ["content"], "properties": {"content": NON_BLANK}},
            },
            {
                "if": {"required": ["role"], "properties": {"role": {"enum": ["developer", "system"]}}},
                "then": {"required": ["content"]},
            },
        ],
    }
    return {
        "type": "object",
        "required": ["threadId", "runId", "messages"],
        "properties": {
            "threadId": {**SESSION_ID, "description": "the session (made on first use)"},
            "runId": TEXT,
            "messages": {
                "type": "array",
                "items": message,
                "contains": {"required": ["role"], "properties": {"role": {"const": "user"}}},
            },
            "state": {},
            "tools": {"type": ["array", "null"], "items": _named("name", "description")},
            "context": {"type": ["array", "null"], "items": _named("description", "value")},
            "forwardedProps": {},
        },
    }


def openapi_document(keyed: bool = True) -> dict[str, Any]:
    """The document; ``keyed``: the server requires ``Authorization: Bearer`` (else no route does)."""
    settings = {
        "type": "object",
        "properties": {
            "id": {**SESSION_ID, "description": "the session id (a fresh UUID when absent)"},
            "model": TEXT,
            "mode": {"type": "string", "enum": ["stateless", "chained", "conversation"]},
            "system": {**TEXT, "description": "a system prompt for every inference"},
        },
        "additionalProperties": False,
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "geppetto serve", "version": "1", "description": "Sessions over HTTP; see docs/server.md"},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["message", "type"],
                            "properties": {"message": {"type": "string"}, "type": {"type": "string"}},
                        }
                    },
                },
                "SessionSettings": settings,
            },
        },
        "security": [{"bearer": []}] if keyed else [],
        "paths": {
            "/api/sessions": {
                "post": {
                    "summary": "Make a session",
                    "requestBody": {"content": {"application/json": {"schema": settings}}},
                    "responses": {"201": _json("The session", {"type": "object"}), **_ERRORS},
                },
                "get": {
                    "summary": "List sessions",
                    "responses": {"200": _json("Every session", {"type": "object"}), **_ERRORS},
                },
            },
            "/api/sessions/{session_id}": {
                "parameters": [_SESSION_ID],
                "get": {
                    "summary": "A session: settings, status, its latest Turn (blocks with provenance), the count "
                    "and last page of its snapshots (older pages at older_snapshots), its last inferences, the tool calls "
                    "waiting for a decision (pending_approvals)",
                    "responses": {"200": _json("The session", {"type": "object"}), **_ERRORS},
                },
                "delete": {"summary": "Delete a session", "responses": {"204": {"description": "Deleted"}, **_ERRORS}},
            },
            "/api/sessions/{session_id}/messages": {
                "parameters": [_SESSION_ID],
                "post": {
                    "summary": "Send a prompt: starts an inference (409 while one runs in any worker)",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["text"],
                                    "properties": {"text": NON_BLANK, "files": FILES},
                                    "additionalProperties": False,
                                }
                            }
                        },
                    },
                    "responses": {
                        "202": _STARTED,
                        **_ERRORS,
                    },
                },
            },
            "/api/sessions/{session_id}/approvals": {
                "parameters": [_SESSION_ID],
                "post": {
                    "summary": "Answer the tool calls that wait (the session's pending_approvals) and continue the "
                    "inference, on any worker: true approves, false or a reason denies, a client-side tool's call "
                    "takes its result; calls left out keep waiting",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["decisions"],
                                    "properties": {"decisions": {"type": "object", "minProperties": 1}},
                                    "additionalProperties": False,
                                }
                            }
                        },
                    },
                    "responses": {
                        "202": _STARTED,
                        **_ERRORS,
                    },
                },
            },
            **history_paths(_SESSION_ID, SESSION_ID, _ERRORS, _json),
            "/api/sessions/{session_id}/cancel": {
                "parameters": [_SESSION_ID],
                "post": {
                    "summary": "Cancel the running inference, in whichever worker runs it",
                    "responses": {"202": _json("Cancelling", {"type": "object"}), **_ERRORS},
                },
            },
            "/api/sessions/{session_id}/events": {
                "parameters": [
                    _SESSION_ID,
                    {"name": "after", "in": "query", "schema": TEXT},
                    {"name": "until", "in": "query", "schema": {"type": "string", "enum": ["finished"]}},
                    {"name": "inference_id", "in": "query", "schema": TEXT},
                    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
                ],
                "get": {
                    "summary": "The session's events as Server-Sent Events, resumable with Last-Event-ID",
                    "responses": {"200": _SSE, **_ERRORS},
                },
            },
            "/api/sessions/{session_id}/snapshots": {
                "parameters": [
                    _SESSION_ID,
                    {"name": "before", "in": "query", "schema": {"type": "integer", "minimum": 1}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1}},
                ],
                "get": {
                    "summary": "A page of snapshot summaries (seq, turn_id, inference_id, saved_at, blocks), the "
                    "last `limit` before `before`, oldest first; `older` is the route of the page before",
                    "responses": {"200": _json("A page of snapshots", {"type": "object"}), **_ERRORS},
                },
            },
            "/api/sessions/{session_id}/snapshots/{seq}": {
                "parameters": [
                    _SESSION_ID,
                    {"name": "seq", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}},
                ],
                "get": {
                    "summary": "One snapshot's Turn, exactly as it was saved",
                    "responses": {"200": _json("The snapshot", {"type": "object"}), **_ERRORS},
                },
            },
            "/api/sessions/{session_id}/inspect": {
                "parameters": [
                    _SESSION_ID,
                    {"name": "before", "in": "query", "schema": {"type": "integer", "minimum": 1}},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "default": 20}},
                ],
                "get": {
                    "summary": "The Turn inspector's report over a window of snapshots (the last `limit` before "
                    "`before`, the latest when absent): the blocks of the window's last snapshot with provenance, "
                    "the requests of its inferences (mode, anchor, delta block ids, input bytes vs the stateless "
                    "equivalent, fallback), diffs between consecutive snapshots of the window; `window` "
                    "(first, last, limit), `snapshot_count`, and `older`, the route of the window before",
                    "responses": {"200": _json("The report", {"type": "object"}), **_ERRORS},
                },
            },
            "/api/dashboard": {
                "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1}}],
                "get": {
                    "summary": "Chained / stateless / fallback counts, fallback reasons, delta sizes, bytes saved and "
                    "API rejections over the most recent sessions (200 unless limit says otherwise), from the "
                    "summary the store keeps per session; `limited` says whether older sessions were left out",
                    "responses": {"200": _json("The totals and one row per session", {"type": "object"}), **_ERRORS},
                },
            },
            "/api/info": {
                "get": {
                    "summary": "The server's profile, provider, model, mode and tools",
                    "responses": {"200": _json("The server", {"type": "object"}), **_ERRORS},
                }
            },
            "/": {
                "get": {
                    "summary": "The web chat, Turn inspector and dashboard (static files under /ui/)",
                    "security": [],
                    "responses": {"200": {"description": "HTML", "content": {"text/html": {}}}},
                }
            },
            "/ag-ui": {
                "post": {
                    "summary": "AG-UI: a RunAgentInput in, its event stream out (threadId is the session)",
                    "requestBody": {"required": True, "content": {"application/json": {"schema": _run_agent_input()}}},
                    "responses": {"200": _SSE, **_ERRORS},
                }
            },
            "/api/chat": {
                "post": {
                    "summary": "Vercel AI SDK UI message stream: the request useChat sends (id is the session)",
                    "requestBody": {"required": True, "content": {"application/json": {"schema": _chat_request()}}},
                    "responses": {"200": _SSE, **_ERRORS},
                }
            },
            "/openapi.json": {
                "get": {"summary": "This document", "security": [], "responses": {"200": {"description": "OpenAPI"}}}
            },
            "/healthz": {"get": {"summary": "Liveness", "security": [], "responses": {"200": {"description": "ok"}}}},
            "/metrics": {
                "get": {
                    "summary": "This worker's counters in the Prometheus text format (needs prometheus_client)",
                    "responses": {"200": {"description": "Prometheus text", "content": {"text/plain": {}}}, **_ERRORS},
                }
            },
        },
    }
