"""``geppetto serve`` with usage limits: every session is bounded, counted with its stored totals."""

from __future__ import annotations

from pathlib import Path

import httpx
from server_support import running_app, sim_profile, sse_events

from geppetto import UsageLimits
from geppetto.runtime import demo_registry
from geppetto.server import create_app
from geppetto.simulator import Simulator


def _run(client: httpx.Client, sid: str, text: str) -> list[dict[str, object]]:
    started = client.post(f"/api/sessions/{sid}/messages", json={"text": text})
    assert started.status_code == 202, started.text
    params = {"after": started.json()["after"], "until": "finished"}
    with client.stream("GET", f"/api/sessions/{sid}/events", params=params) as response:
        return list(sse_events(response.iter_lines()))


def test_served_sessions_stop_at_their_limits_and_keep_their_usage(geppetto_sim: Simulator, tmp_path: Path) -> None:
    app = create_app(
        sim_profile(geppetto_sim),
        store=str(tmp_path / "s.db"),
        tools=demo_registry(),
        limits=UsageLimits(max_requests=3),
    )
    with running_app(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        sid = str(client.post("/api/sessions", json={}).json()["id"])
        first = _run(client, sid, "What is the weather in Paris?")  # a tool call, then the answer: 2 requests
        assert first[-1]["data"]["status"] == "completed"  # type: ignore[index]
        session = client.get(f"/api/sessions/{sid}").json()
        assert session["latest"]["metadata"]["geppetto.session_usage@v1"]["requests"] == 2
        second = _run(client, sid, "What is the weather in Oslo?")  # the third request is allowed, the fourth is not
        finished = second[-1]["data"]
        assert finished["status"] == "failed"  # type: ignore[index]
        assert "usage limit max_requests=3" in str(finished)
        # In the server's terms, in the event and in the session's record: the flag, not the Python call.
        error = str(finished["error"])  # type: ignore[index]
        assert "geppetto serve --limits max_requests=<more>" in error
        assert "session.limits" not in error and "error.turn" not in error
        [record] = [r for r in client.get(f"/api/sessions/{sid}").json()["inferences"] if r["status"] == "failed"]
        assert record["error"] == error
    assert [r.path for r in geppetto_sim.requests].count("/v1/responses") == 3
