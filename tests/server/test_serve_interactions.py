"""``geppetto serve`` sessions on the Gemini Interactions engine: two prompts, the second chained on the
first interaction, both answers in the session's events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from server_support import running_app, sim_profile, sse_events

from geppetto.server import create_app
from geppetto.simulator import Simulator


def _prompt(client: httpx.Client, sid: str, text: str) -> list[dict[str, Any]]:
    started = client.post(f"/api/sessions/{sid}/messages", json={"text": text})
    assert started.status_code == 202, started.text
    params = {"after": started.json()["after"], "until": "finished", "inference_id": started.json()["inference_id"]}
    with client.stream("GET", f"/api/sessions/{sid}/events", params=params) as response:
        return list(sse_events(response.iter_lines()))


def test_a_served_session_chains_on_the_interactions_api(geppetto_sim: Simulator, tmp_path: Path) -> None:
    app = create_app(sim_profile(geppetto_sim, "gemini-interactions"), store=str(tmp_path / "s.db"))
    with running_app(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        created = client.post("/api/sessions", json={})
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        first = _prompt(client, sid, "hello")
        second = _prompt(client, sid, "again")
    assert first[-1]["data"]["status"] == "completed" and second[-1]["data"]["status"] == "completed"
    bodies = [r.body for r in geppetto_sim.requests if r.path == "/v1beta/interactions"]
    assert len(bodies) == 2 and "previous_interaction_id" not in bodies[0]
    assert bodies[1]["previous_interaction_id"] and len(bodies[1]["input"]) == 1
    finals = [e for e in second if e["event"] == "final"]
    assert finals and finals[-1]["data"]["text"] == "You said: again"
