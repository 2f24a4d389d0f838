"""The OpenAPI 3.1 document of the server's API, served at ``/openapi.json``."""

from __future__ import annotations

from typing import Any

__all__ = ["openapi_document"]


def _error() -> dict[str, Any]:
    return {
        "description": "An error: what went wrong and how to fix it",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_SSE = {"description": "Server-Sent Events", "content": {"text/event-stream": {"schema": {"type": "string"}}}}
_SESSION_ID = {"name": "session_id", "in": "path", "required": True, "schema": {"type": "string"}}
_ERRORS = {str(code): _error() for code in (400, 401, 404, 409, 413, 422)}


def openapi_document() -> dict[str, Any]:
    settings = {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "the session id (a fresh UUID when absent)"},
            "model": {"type": "string"},
            "mode": {"type": "string", "enum": ["stateless", "chained", "conversation"]},
            "system": {"type": "string", "description": "a system prompt for every inference"},
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
        "security": [{"bearer": []}],
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
                    "and last page of its snapshots (older pages at older_snapshots), its last inferences",
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
                                    "properties": {"text": {"type": "string"}},
                                }
                            }
                        },
                    },
                    "responses": {
                        "202": _json(
                            "Started; read its events after `after`",
                            {
                                "type": "object",
                                "properties": {
                                    "inference_id": {"type": "string"},
                                    "after": {"type": "string"},
                                    "events": {"type": "string"},
                                },
                            },
                        ),
                        **_ERRORS,
                    },
                },
            },
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
                    {"name": "after", "in": "query", "schema": {"type": "string"}},
                    {"name": "until", "in": "query", "schema": {"type": "string", "enum": ["finished"]}},
                    {"name": "inference_id", "in": "query", "schema": {"type": "string"}},
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
                    "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}},
                    "responses": {"200": _SSE, **_ERRORS},
                }
            },
            "/api/chat": {
                "post": {
                    "summary": "Vercel AI SDK UI message stream: the request useChat sends (id is the session)",
                    "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}},
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
