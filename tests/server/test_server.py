"""``geppetto serve`` in-process: the REST API, resumable events, cancel, errors, tools, OpenAPI."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import running_app, sim_profile, sse_events

from geppetto.runtime import demo_registry
from geppetto.server import create_app
from geppetto.simulator import Simulator


@pytest.fixture
def server(geppetto_sim: Simulator, tmp_path: Path) -> Iterator[httpx.Client]:
    app = create_app(sim_profile(geppetto_sim), store=str(tmp_path / "s.db"), tools=demo_registry())
    with running_app(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def new_session(client: httpx.Client, **settings: Any) -> str:
    response = client.post("/api/sessions", json=settings)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def events_of(client: httpx.Client, session_id: str, after: str, **params: str) -> list[dict[str, Any]]:
    with client.stream(
        "GET", f"/api/sessions/{session_id}/events", params={"after": after, "until": "finished", **params}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(sse_events(response.iter_lines()))


def prompt(client: httpx.Client, session_id: str, text: str) -> dict[str, Any]:
    response = client.post(f"/api/sessions/{session_id}/messages", json={"text": text})
    assert response.status_code == 202, response.text
    return dict(response.json())


def test_a_prompt_streams_its_events_and_saves_the_turn(server: httpx.Client) -> None:
    sid = new_session(server, system="You are terse.")
    started = prompt(server, sid, "Hello there")
    events = events_of(server, sid, started["after"])
    types = [e["event"] for e in events]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert "text_delta" in types and "final" in types
    assert events[-1]["data"]["status"] == "completed"
    assert all(e["data"]["inference_id"] == started["inference_id"] for e in events)
    ids = [int(e["id"]) for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    text = "".join(e["data"]["delta"] for e in events if e["event"] == "text_delta")

    session = server.get(f"/api/sessions/{sid}").json()
    assert session["status"] == "idle"
    assert session["settings"] == {"system": "You are terse."}
    turn = session["latest"]
    assert session["snapshot_count"] == 1
    kinds = [b["kind"] for b in turn["blocks"]]
    assert kinds[:2] == ["system", "user"] and kinds[-1] == "llm_text"
    assert turn["blocks"][-1]["payload"]["text"] == text
    assert turn["blocks"][-1]["metadata"]["geppetto.inference_id@v1"] == started["inference_id"]
    assert [i["status"] for i in session["inferences"]] == ["completed"]
    assert session["last_event_id"] == events[-1]["id"]

    second = prompt(server, sid, "And again")
    assert events_of(server, sid, second["after"])[-1]["data"]["status"] == "completed"
    assert len(server.get(f"/api/sessions/{sid}").json()["snapshots"]) == 2
    listed = {s["session_id"]: s for s in server.get("/api/sessions").json()["sessions"]}
    assert listed[sid]["snapshots"] == 2


def test_tools_run_in_the_server(server: httpx.Client) -> None:
    sid = new_session(server)
    started = prompt(server, sid, "What is the weather in Paris?")
    events = events_of(server, sid, started["after"])
    types = [e["event"] for e in events]
    assert "tool_call" in types and "tool_result" in types
    result = next(e["data"] for e in events if e["event"] == "tool_result")
    assert result["name"] == "get_weather" and result.get("error") is None


def test_a_second_prompt_while_one_runs_is_409_then_cancel_frees_the_session(
    server: httpx.Client, geppetto_sim: Simulator
) -> None:
    sid = new_session(server)
    geppetto_sim.fail_next(slow_first_byte=20)
    started = prompt(server, sid, "Hello")
    busy = server.post(f"/api/sessions/{sid}/messages", json={"text": "again"})
    assert busy.status_code == 409
    assert busy.json()["error"]["type"] == "session_busy"
    assert "cancel" in busy.json()["error"]["message"]
    assert server.get(f"/api/sessions/{sid}").json()["status"] == "running"
    cancelled = server.post(f"/api/sessions/{sid}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["inference_id"] == started["inference_id"]
    events = events_of(server, sid, started["after"])
    assert events[-1]["data"]["status"] == "cancelled"
    assert server.post(f"/api/sessions/{sid}/cancel").status_code == 409  # nothing runs now
    again = prompt(server, sid, "Hello once more")
    assert events_of(server, sid, again["after"])[-1]["data"]["status"] == "completed"


def test_reconnecting_with_last_event_id_loses_and_repeats_nothing(server: httpx.Client) -> None:
    sid = new_session(server)
    started = prompt(server, sid, "Tell me a long story please")
    whole = events_of(server, sid, started["after"])
    assert len(whole) > 4
    first: list[dict[str, Any]] = []
    with server.stream("GET", f"/api/sessions/{sid}/events", params={"after": started["after"]}) as response:
        for event in sse_events(response.iter_lines()):
            first.append(event)
            if len(first) == 3:
                break  # the client goes away mid-stream
    with server.stream(
        "GET", f"/api/sessions/{sid}/events", headers={"Last-Event-ID": first[-1]["id"]}, params={"until": "finished"}
    ) as response:
        rest = list(sse_events(response.iter_lines()))
    assert [e["id"] for e in first + rest] == [e["id"] for e in whole]


def test_a_client_that_leaves_mid_stream_does_not_stop_the_inference(
    server: httpx.Client, geppetto_sim: Simulator
) -> None:
    sid = new_session(server)
    geppetto_sim.fail_next(slow_first_byte=0.5)
    started = prompt(server, sid, "Hello")
    with server.stream("GET", f"/api/sessions/{sid}/events", params={"after": started["after"]}) as response:
        next(sse_events(response.iter_lines()))  # run_started, then the client leaves
    events = events_of(server, sid, started["after"])
    assert events[-1]["data"]["status"] == "completed"
    assert len(server.get(f"/api/sessions/{sid}").json()["snapshots"]) == 1


def test_a_provider_error_is_a_failed_inference_and_the_session_goes_on(
    server: httpx.Client, geppetto_sim: Simulator
) -> None:
    sid = new_session(server)
    geppetto_sim.fail_next(400)
    started = prompt(server, sid, "Hello")
    finished = events_of(server, sid, started["after"])[-1]["data"]
    assert finished["status"] == "failed" and "400" in finished["error"]
    again = prompt(server, sid, "Hello")
    assert events_of(server, sid, again["after"])[-1]["data"]["status"] == "completed"


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "kind", "says"),
    [
        ("POST", "/api/sessions", b"{not json", 400, "malformed_json", "not valid JSON"),
        ("POST", "/api/sessions", b"[1]", 400, "invalid_request", "JSON object"),
        ("POST", "/api/sessions", b'{"colour": "red"}', 422, "invalid_request", "unknown field(s) colour"),
        ("POST", "/api/sessions", b'{"mode": "sideways"}', 422, "invalid_request", "stateless, chained"),
        ("GET", "/api/sessions/nope", None, 404, "not_found", "no session 'nope'"),
        ("POST", "/api/sessions/nope/messages", b'{"text": "hi"}', 404, "not_found", "no session 'nope'"),
        ("GET", "/api/sessions/nope/events", None, 404, "not_found", "no session 'nope'"),
        ("DELETE", "/api/sessions/nope", None, 404, "not_found", "no session 'nope'"),
        ("GET", "/no/such/route", None, 404, "not_found", "see /openapi.json"),
        ("PUT", "/api/sessions", b"{}", 405, "bad_method", "PUT is not allowed"),
        ("POST", "/api/chat", b'{"id": "c"}', 422, "invalid_request", "'messages' is a required property"),
        ("POST", "/ag-ui", b'{"threadId": "t"}', 422, "invalid_request", "not an AG-UI run input"),
    ],
)
def test_bad_requests_get_a_json_error_naming_the_fix(
    server: httpx.Client, method: str, path: str, body: bytes | None, status: int, kind: str, says: str
) -> None:
    response = server.request(method, path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == kind
    assert says in error["message"]


def test_a_prompt_needs_text_and_an_oversized_body_is_413(server: httpx.Client) -> None:
    sid = new_session(server)
    missing = server.post(f"/api/sessions/{sid}/messages", json={})
    assert missing.status_code == 422 and '{"text"' in missing.json()["error"]["message"]
    huge = server.post(f"/api/sessions/{sid}/messages", json={"text": "x" * (17 << 20)})  # over the 16 MiB default
    assert huge.status_code == 413 and "limit" in huge.json()["error"]["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while read
        yield b'{"text": "'
        for _ in range(17 * 16):  # 17 MiB, over the 16 MiB default
            yield b"y" * 65536
        yield b'"}'

    streamed = server.post(f"/api/sessions/{sid}/messages", content=chunks())
    assert streamed.status_code == 413
    assert server.get(f"/api/sessions/{sid}").json()["inferences"] == []


def test_an_unknown_event_id_is_reported_in_the_stream(server: httpx.Client) -> None:
    sid = new_session(server)
    with server.stream("GET", f"/api/sessions/{sid}/events", headers={"Last-Event-ID": "garbage"}) as response:
        [event] = list(sse_events(response.iter_lines()))
    assert event["event"] == "error" and "reconnect without an id" in event["data"]["message"]


def test_session_ids_settings_and_delete(server: httpx.Client) -> None:
    assert server.post("/api/sessions", json={"id": "mine", "model": "sim-2"}).status_code == 201
    again = server.post("/api/sessions", json={"id": "mine"})
    assert again.status_code == 409 and "already exists" in again.json()["error"]["message"]
    started = prompt(server, "mine", "Hello")
    events = events_of(server, "mine", started["after"])
    assert events[-1]["data"]["status"] == "completed"
    assert {e["data"]["metadata"].get("model") for e in events if e["event"] == "final"} == {"sim-2"}
    assert server.delete("/api/sessions/mine").status_code == 204
    assert server.get("/api/sessions/mine").status_code == 404


def test_openapi_lists_every_route(server: httpx.Client) -> None:
    document = server.get("/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    app_routes = {
        ("/api/sessions", "post"),
        ("/api/sessions", "get"),
        ("/api/sessions/{session_id}", "get"),
        ("/api/sessions/{session_id}", "delete"),
        ("/api/sessions/{session_id}/messages", "post"),
        ("/api/sessions/{session_id}/cancel", "post"),
        ("/api/sessions/{session_id}/events", "get"),
        ("/api/chat", "post"),
        ("/ag-ui", "post"),
        ("/api/sessions/{session_id}/inspect", "get"),
        ("/api/dashboard", "get"),
        ("/api/info", "get"),
        ("/", "get"),
    }
    documented = {(p, m) for p, ops in document["paths"].items() for m in ops if m != "parameters"}
    assert app_routes <= documented


def test_an_api_key_is_required_when_set(geppetto_sim: Simulator, tmp_path: Path) -> None:
    app = create_app(sim_profile(geppetto_sim), store=str(tmp_path / "s.db"), api_key="s3cret")
    with running_app(app) as url, httpx.Client(base_url=url) as client:
        refused = client.get("/api/sessions")
        assert refused.status_code == 401 and "Bearer" in refused.json()["error"]["message"]
        assert client.get("/api/sessions", headers={"authorization": "Bearer wrong"}).status_code == 401
        assert client.get("/api/sessions", headers={"authorization": "Bearer s3cret"}).status_code == 200
        assert client.get("/openapi.json").status_code == 200


def test_concurrent_prompts_to_one_session_start_exactly_one(server: httpx.Client, geppetto_sim: Simulator) -> None:
    sid = new_session(server)
    geppetto_sim.fail_next(slow_first_byte=1)
    statuses: list[int] = []

    def send() -> None:
        statuses.append(server.post(f"/api/sessions/{sid}/messages", json={"text": "hi"}).status_code)

    threads = [threading.Thread(target=send) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [202] + [409] * 7
    deadline = time.monotonic() + 20
    while server.get(f"/api/sessions/{sid}").json()["status"] == "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [i["status"] for i in server.get(f"/api/sessions/{sid}").json()["inferences"]] == ["completed"]
