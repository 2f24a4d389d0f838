"""Tool calls that wait for a person behind ``geppetto serve``: the ``approval_requested`` event, the
session's ``pending_approvals``, ``POST /api/sessions/{id}/approvals`` and its errors, and two workers on one
store (PostgreSQL) and one bus (Redis) where the approval is answered on the worker that did not run the inference."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import bus_url, running_app, sim_profile, sse_events

import geppetto as gp
from geppetto.server import create_app
from geppetto.simulator import Simulator
from geppetto.tools import ToolRegistry

deleted: list[str] = []


@gp.tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    deleted.append(path)
    return f"deleted {path}"


def _tools() -> ToolRegistry:
    return ToolRegistry([delete_file])


@pytest.fixture(autouse=True)
def _clear() -> None:
    deleted.clear()


@pytest.fixture
def server(geppetto_sim: Simulator, tmp_path: Path) -> Iterator[httpx.Client]:
    app = create_app(sim_profile(geppetto_sim), store=str(tmp_path / "s.db"), tools=_tools())
    with running_app(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def _events(client: httpx.Client, sid: str, started: dict[str, Any]) -> list[dict[str, Any]]:
    params = {"after": started["after"], "until": "finished", "inference_id": started["inference_id"]}
    with client.stream("GET", f"/api/sessions/{sid}/events", params=params) as response:
        assert response.status_code == 200
        return list(sse_events(response.iter_lines()))


def _post(client: httpx.Client, path: str, body: Any, status: int = 202) -> dict[str, Any]:
    response = client.post(path, json=body)
    assert response.status_code == status, response.text
    return dict(response.json())


def _pause(client: httpx.Client, sid: str) -> tuple[str, list[dict[str, Any]]]:
    started = _post(client, f"/api/sessions/{sid}/messages", {"text": "delete_file for 'a.txt'"})
    events = _events(client, sid, started)
    assert events[-1]["data"]["status"] == "completed", events[-1]
    [asked] = [e for e in events if e["event"] == "approval_requested"]
    [call] = asked["data"]["calls"]
    assert call["name"] == "delete_file" and call["arguments"] == {"path": "a.txt"} and call["kind"] == "approval"
    return call["call_id"], events


def test_a_pause_is_in_the_events_and_the_session_and_an_approval_continues_it(server: httpx.Client) -> None:
    sid = _post(server, "/api/sessions", {}, 201)["id"]
    call_id, events = _pause(server, sid)
    assert "tool_result" not in [e["event"] for e in events] and deleted == []
    session = server.get(f"/api/sessions/{sid}").json()
    assert [p["call_id"] for p in session["pending_approvals"]] == [call_id] and session["status"] == "idle"

    refused = server.post(f"/api/sessions/{sid}/messages", json={"text": "something else"})
    assert refused.status_code == 409 and refused.json()["error"]["type"] == "approval_pending"
    # In an HTTP client's terms: the route and its body, and what the web chat shows; no Python call.
    message = refused.json()["error"]["message"]
    assert f'answer them with POST /api/sessions/{sid}/approvals with {{"decisions": {{"{call_id}": true}}}}' in message
    assert "(true approves, false or a reason denies" in message
    assert "in the web chat: Approve or Deny on the call's card" in message
    assert "session.resume" not in message and "await " not in message and "drop_pending" not in message
    run = {"threadId": sid, "runId": "r1", "state": {}, "messages": [{"id": "m1", "role": "user", "content": "hi"}]}
    run |= {"tools": [], "context": []}
    agui = [e["data"] for e in sse_events(server.post("/ag-ui", json=run).text.splitlines())]
    assert [e["type"] for e in agui] == ["RUN_STARTED", "RUN_ERROR"] and agui[1]["code"] == "approval_pending"
    assert f"POST /api/sessions/{sid}/approvals" in agui[1]["message"] and "session.resume" not in agui[1]["message"]

    started = _post(server, f"/api/sessions/{sid}/approvals", {"decisions": {call_id: True}})
    events = _events(server, sid, started)
    assert events[-1]["data"]["status"] == "completed"
    [result] = [e["data"] for e in events if e["event"] == "tool_result"]
    assert result["call_id"] == call_id and result["result"] == "deleted a.txt"
    assert deleted == ["a.txt"]
    session = server.get(f"/api/sessions/{sid}").json()
    assert session["pending_approvals"] == []
    kinds = [b["kind"] for b in session["latest"]["blocks"]]
    assert kinds == ["user", "tool_call", "tool_use", "llm_text"]
    assert "deleted a.txt" in session["latest"]["blocks"][-1]["payload"]["text"]


def test_approval_requests_that_cannot_be_taken_name_the_fix(server: httpx.Client) -> None:
    sid = _post(server, "/api/sessions", {}, 201)["id"]
    nothing = server.post(f"/api/sessions/{sid}/approvals", json={"decisions": {"c1": True}})
    assert nothing.status_code == 409 and "no tool call waiting" in nothing.json()["error"]["message"]
    assert f"send the next prompt with POST /api/sessions/{sid}/messages" in nothing.json()["error"]["message"]
    call_id, _ = _pause(server, sid)
    for body, status, words in [
        ({}, 422, '{"decisions": {"<call_id>": true'),
        ({"decisions": {}}, 422, "pending_approvals"),
        ({"decisions": {call_id: True}, "x": 1}, 422, "unknown field(s) x"),
        ({"decisions": {"nope": True}}, 409, f"waiting: {call_id}"),
        ({"decisions": {call_id: 3}}, 409, "must be true (approve), false (deny) or a string"),
    ]:
        response = server.post(f"/api/sessions/{sid}/approvals", json=body)
        assert response.status_code == status, (body, response.text)
        assert words in response.json()["error"]["message"]
    assert [p["call_id"] for p in server.get(f"/api/sessions/{sid}").json()["pending_approvals"]] == [call_id]
    started = _post(server, f"/api/sessions/{sid}/approvals", {"decisions": {call_id: "not today"}})
    [result] = [e["data"] for e in _events(server, sid, started) if e["event"] == "tool_result"]
    assert result["error"] == "the user denied this tool call: not today" and deleted == []


def test_an_approval_answered_on_the_worker_that_did_not_run_the_inference(
    geppetto_sim: Simulator, postgres_target: str
) -> None:
    path, bus = postgres_target, bus_url("redis")  # two workers share PostgreSQL and Redis, as deployed
    a_app = create_app(sim_profile(geppetto_sim), store=path, bus=bus, tools=_tools())
    b_app = create_app(sim_profile(geppetto_sim), store=path, bus=bus, tools=_tools())
    with (
        running_app(a_app) as a_url,
        running_app(b_app) as b_url,
        httpx.Client(base_url=a_url, timeout=30) as a,
        httpx.Client(base_url=b_url, timeout=30) as b,
    ):
        assert a.get("/api/info").json()["worker"] != "" and a_url != b_url
        sid = _post(a, "/api/sessions", {}, 201)["id"]
        call_id, _ = _pause(a, sid)  # worker A ran the inference and keeps the session hot
        assert [p["call_id"] for p in b.get(f"/api/sessions/{sid}").json()["pending_approvals"]] == [call_id]
        started = _post(b, f"/api/sessions/{sid}/approvals", {"decisions": {call_id: True}})
        events = _events(a, sid, started)  # read on A: the bus carries B's events
        assert events[-1]["data"]["status"] == "completed"
        assert [e["data"]["result"] for e in events if e["event"] == "tool_result"] == ["deleted a.txt"]
        assert deleted == ["a.txt"]
        # A's hot copy is older than what B saved: A's next prompt continues after the approval
        started = _post(a, f"/api/sessions/{sid}/messages", {"text": "thanks"})
        assert _events(a, sid, started)[-1]["data"]["status"] == "completed"
        kinds = [blk["kind"] for blk in a.get(f"/api/sessions/{sid}").json()["latest"]["blocks"]]
        assert kinds == ["user", "tool_call", "tool_use", "llm_text", "user", "llm_text"]
