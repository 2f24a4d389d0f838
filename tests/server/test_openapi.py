"""The API document is generated from the routes and their models: it validates, lists every route with its
error answers, and what the server answers matches what it documents."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import running_app, sim_profile, sse_events

from geppetto.server import create_app
from geppetto.simulator import Simulator

pytest.importorskip("fastapi")

ERROR_CODES = {"400", "401", "403", "404", "405", "409", "413", "415", "421", "422", "503"}
OPEN_ROUTES = {"/", "/ui/{name}", "/openapi.json", "/docs", "/healthz"}


@pytest.fixture
def server(geppetto_sim: Simulator, tmp_path: Path) -> Iterator[httpx.Client]:
    app = create_app(sim_profile(geppetto_sim), store=str(tmp_path / "s.db"))
    with running_app(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def _conforms(document: dict[str, Any], schema: dict[str, Any], value: Any) -> list[str]:
    """The ways ``value`` breaks ``schema`` (a schema of ``document``, its ``$ref``s into its components)."""
    from jsonschema import Draft202012Validator

    rooted = {**schema, "components": document["components"]}
    return [e.message for e in Draft202012Validator(rooted).iter_errors(value)]


def test_the_document_validates_and_lists_every_route_with_its_errors(server: httpx.Client) -> None:
    from openapi_spec_validator import validate

    document = server.get("/openapi.json").json()
    validate(document)
    assert document["openapi"].startswith("3.1")
    app = server.get("/openapi.json")  # served twice: the same document
    assert app.json() == document
    operations = {(p, m): op for p, ops in document["paths"].items() for m, op in ops.items()}
    assert ("/api/sessions/{session_id}/approvals", "post") in operations
    assert ("/api/sessions/{session_id}/snapshots/{seq}", "get") in operations
    assert not [key for key in operations if key[1] == "head"]
    for (path, method), operation in operations.items():
        if path in OPEN_ROUTES:
            assert operation.get("security") == [], path
            continue
        assert "security" not in operation, (path, method)
        assert set(operation["responses"]) >= ERROR_CODES, (path, method)
        for code in ERROR_CODES:
            content = operation["responses"][code]["content"]["application/json"]
            assert content["schema"] == {"$ref": "#/components/schemas/ErrorBody"}, (path, method, code)


def test_the_server_routes_match_the_document(geppetto_sim: Simulator, tmp_path: Path) -> None:
    from fastapi.routing import APIRoute

    app = create_app(sim_profile(geppetto_sim), store=str(tmp_path / "s.db"))
    served = {(r.path, m.lower()) for r in app.routes if isinstance(r, APIRoute) for m in r.methods or ()}
    with running_app(app) as url:
        document = httpx.get(url + "/openapi.json").json()
    documented = {(p, m) for p, ops in document["paths"].items() for m in ops}
    assert {(p, m) for p, m in served if m != "head"} == documented


def test_answers_match_their_documented_schemas(server: httpx.Client) -> None:
    document = server.get("/openapi.json").json()

    def check(path: str, method: str, response: httpx.Response) -> None:
        answer = document["paths"][path][method]["responses"][str(response.status_code)]
        schema = answer["content"]["application/json"]["schema"]
        assert _conforms(document, schema, response.json()) == [], (path, response.text)

    created = server.post("/api/sessions", json={"id": "s1", "system": "Be brief."})
    check("/api/sessions", "post", created)
    started = server.post("/api/sessions/s1/messages", json={"text": "Hello"})
    check("/api/sessions/{session_id}/messages", "post", started)
    with server.stream("GET", started.json()["events"] + "&until=finished") as events:
        assert list(sse_events(events.iter_lines()))[-1]["event"] == "run_finished"
    check("/api/sessions", "get", server.get("/api/sessions"))
    check("/api/sessions/{session_id}", "get", server.get("/api/sessions/s1"))
    check("/api/sessions/{session_id}/snapshots", "get", server.get("/api/sessions/s1/snapshots"))
    check("/api/sessions/{session_id}/snapshots/{seq}", "get", server.get("/api/sessions/s1/snapshots/1"))
    check("/api/info", "get", server.get("/api/info"))
    check("/healthz", "get", server.get("/healthz"))
    for path, method, response in [
        ("/api/sessions/{session_id}", "get", server.get("/api/sessions/nope")),
        ("/api/sessions/{session_id}/messages", "post", server.post("/api/sessions/s1/messages", json={"x": 1})),
        ("/api/sessions/{session_id}/snapshots/{seq}", "get", server.get("/api/sessions/s1/snapshots/0")),
    ]:
        assert response.status_code in (404, 422)
        check(path, method, response)


def test_parameters_and_bodies_are_refused_with_the_message_their_model_names(server: httpx.Client) -> None:
    server.post("/api/sessions", json={"id": "s1"})
    for path, says in [
        ("/api/sessions/s1/snapshots/x", "'seq' must be a positive whole number"),
        ("/api/sessions/s1/snapshots?limit=0", "'limit' must be a positive whole number"),
        ("/api/dashboard?limit=x", "'limit' must be a number of sessions from 1 to 1000000"),
        ("/api/sessions/s1/events?until=later", "'until' must be finished"),
    ]:
        answer = server.get(path)
        assert answer.status_code == 422, path
        assert answer.json()["error"] == {"message": answer.json()["error"]["message"], "type": "invalid_request"}
        assert answer.json()["error"]["message"].startswith(says), answer.text
    for body, says in [
        ({"id": 5}, "'id' must be a string of 1 to 200 characters"),
        ({"id": None}, "'id' must be a string of 1 to 200 characters"),
        ({"model": 5}, "'model' must be a string"),
        ({"b": 1, "a": 2, "mode": "x"}, "unknown field(s) a, b; a session takes model, mode, system"),
    ]:
        answer = server.post("/api/sessions", json=body)
        assert answer.status_code == 422 and answer.json()["error"]["message"].startswith(says), answer.text
    files = server.post("/api/sessions/s1/messages", json={"text": "hi", "files": [{"path": "/etc/passwd"}]})
    assert files.status_code == 422 and files.json()["error"]["type"] == "invalid_request"
    empty = server.post("/api/sessions/s1/approvals", json={"decisions": {}})
    assert empty.status_code == 422 and "pending_approvals" in empty.json()["error"]["message"]


def test_what_the_document_allows_is_taken_and_what_it_does_not_is_refused(server: httpx.Client) -> None:
    # The findings of schemathesis's first run against the document (tests/server/test_schemathesis.py
    # keeps looking): each answer now agrees with the schema.
    document = server.get("/openapi.json").json()
    server.post("/api/sessions", json={"id": "s1"})
    server.post("/api/sessions", json={"id": "s2"})
    refused = [
        ("/api/sessions/s1/fork", {"id": None}),  # was 201
        ("/api/sessions/s1/messages", {"text": "hi", "files": None}),  # was 202
        ("/api/sessions/s1/messages", {"text": "hi", "files": [{"media_type": "", "data": None, "url": None}]}),
        ("/api/sessions/s1/messages", {"text": "hi", "files": [{"media_type": "text/plain", "data": "aGk=", "x": 1}]}),
        ("/api/sessions/s1/rewind", {"n": "1"}),
        ("/api/sessions/s1/rewind", {"n": True}),
        ("/api/sessions/s1/rewind", {"n": 1.5}),
        (
            "/api/sessions/s1/messages",
            {"text": "hi", "files": [{"media_type": "text/plain", "data": "aGk=", "filename": None}]},
        ),
    ]
    for path, body in refused:
        answer = server.post(path, json=body)
        assert answer.status_code == 422, (path, body, answer.text)
    # A whole number written 2.0 is an integer to JSON Schema: taken (there is nothing to rewind: 409).
    answer = server.post("/api/sessions/s2/rewind", json={"n": 2.0})
    assert answer.status_code == 409 and "has no snapshot yet" in answer.json()["error"]["message"], answer.text
    # A session that exists but runs nothing: its state refuses (409), it is not missing (404).
    assert server.post("/api/sessions/s1/cancel").status_code == 409
    too_big = 2**63
    for path in (f"/api/sessions/s1/snapshots/{too_big}", f"/api/dashboard?limit={too_big}"):
        answer = server.get(path)
        assert answer.status_code == 422, (path, answer.text)  # was 500 (OverflowError)
    page = server.get("/ui/nope.js")
    assert page.status_code == 404 and page.headers["content-type"] == "application/json"
    documented = document["paths"]["/ui/{name}"]["get"]["responses"]["404"]["content"]
    assert documented["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}


def test_the_docs_page_and_head_requests(server: httpx.Client) -> None:
    docs = server.get("/docs")
    assert docs.status_code == 200 and '<script type="module" src="/ui/docs.js">' in docs.text
    assert server.head("/healthz").status_code == 200
    assert server.head("/api/sessions").status_code == 200
