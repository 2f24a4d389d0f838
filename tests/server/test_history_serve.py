"""History edits behind ``geppetto serve``: ``POST /api/sessions/{id}/rewind`` and ``/fork`` in chained and
conversation mode, their errors, and the OpenAPI entries."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import running_app, sim_profile, sse_events

from geppetto.server import create_app
from geppetto.simulator import Simulator


@pytest.fixture
def server(geppetto_sim: Simulator, tmp_path: Path) -> Iterator[httpx.Client]:
    app = create_app(sim_profile(geppetto_sim), store=str(tmp_path / "s.db"))
    with running_app(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def _post(client: httpx.Client, path: str, body: Any, status: int) -> dict[str, Any]:
    response = client.post(path, json=body)
    assert response.status_code == status, response.text
    return dict(response.json())


def _say(client: httpx.Client, sid: str, text: str) -> None:
    started = _post(client, f"/api/sessions/{sid}/messages", {"text": text}, 202)
    params = {"after": started["after"], "until": "finished", "inference_id": started["inference_id"]}
    with client.stream("GET", f"/api/sessions/{sid}/events", params=params) as response:
        events = list(sse_events(response.iter_lines()))
    assert events[-1]["data"]["status"] == "completed", events[-1]


def _users(client: httpx.Client, sid: str) -> list[str]:
    latest = client.get(f"/api/sessions/{sid}").json()["latest"]
    return [b["payload"]["text"] for b in latest["blocks"] if b["kind"] == "user"]


def _last_body(sim: Simulator) -> dict[str, Any]:
    return [r for r in sim.requests if r.path == "/v1/responses"][-1].body


@pytest.mark.parametrize("mode", ["chained", "conversation"])
def test_rewind_and_fork_through_the_server(server: httpx.Client, geppetto_sim: Simulator, mode: str) -> None:
    sid = _post(server, "/api/sessions", {"mode": mode}, 201)["id"]
    for text in ("one", "two", "three"):
        _say(server, sid, text)
    rewound = _post(server, f"/api/sessions/{sid}/rewind", {"n": 2}, 200)
    assert (rewound["id"], rewound["rewound"], rewound["blocks"]) == (sid, 2, 2)
    assert _users(server, sid) == ["one"]
    _say(server, sid, "four")
    body = _last_body(geppetto_sim)
    assert [i.get("content") for i in body["input"]] == ["four"]  # only the new prompt: re-anchored
    forked = _post(server, f"/api/sessions/{sid}/fork", {"id": "branch"}, 201)
    assert (forked["id"], forked["from"], forked["settings"]) == ("branch", sid, {"mode": mode})
    _say(server, "branch", "five")
    _say(server, sid, "six")
    assert _users(server, "branch") == ["one", "four", "five"]
    assert _users(server, sid) == ["one", "four", "six"]
    snapshots = server.get(f"/api/sessions/{sid}").json()["snapshots"]
    assert len(snapshots) == 6  # three answers, the rewind, two answers
    report = server.get(f"/api/sessions/{sid}/inspect").json()
    assert [s["history_edit"]["op"] for s in report["snapshots"] if s["history_edit"]] == ["rewind"]
    after_rewind = report["requests"][3]
    if mode == "conversation":  # the conversation was cut back to the first answer: the inspector says so
        assert after_rewind["repair"]["deleted"] == 4 and "repaired in place" in after_rewind["why"]
    else:
        assert after_rewind["previous_response_id"] == report["requests"][0]["response_id"]
    forked_report = server.get("/api/sessions/branch/inspect").json()
    assert forked_report["snapshots"][0]["history_edit"]["from"] == sid


def test_history_edits_that_cannot_be_done_name_the_fix(server: httpx.Client) -> None:
    sid = _post(server, "/api/sessions", {}, 201)["id"]
    empty = server.post(f"/api/sessions/{sid}/rewind", json={"n": 1})
    assert empty.status_code == 409 and "POST /api/sessions/" in empty.json()["error"]["message"]
    _say(server, sid, "one")
    too_many = server.post(f"/api/sessions/{sid}/rewind", json={"n": 3})
    assert too_many.status_code == 409 and "holds 1" in too_many.json()["error"]["message"]
    bad = server.post(f"/api/sessions/{sid}/rewind", json={"n": "two"})
    assert bad.status_code == 422 and '{"n": N}' in bad.json()["error"]["message"]
    assert server.post("/api/sessions/nope/fork", json={}).status_code == 404
    _post(server, f"/api/sessions/{sid}/fork", {"id": "taken"}, 201)
    taken = server.post(f"/api/sessions/{sid}/fork", json={"id": "taken"})
    assert taken.status_code == 409 and "already exists" in taken.json()["error"]["message"]
    paths = server.get("/openapi.json").json()["paths"]
    assert "post" in paths["/api/sessions/{session_id}/rewind"] and "post" in paths["/api/sessions/{session_id}/fork"]
