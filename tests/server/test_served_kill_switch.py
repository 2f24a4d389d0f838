"""The kill switch reaches the sessions ``geppetto serve`` runs: with ``GEPPETTO_CHAINING=off`` a served
session in chained or conversation mode sends every request stateless, and ``GET /metrics`` says so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_support import running_app, sim_profile
from test_server import events_of, new_session, prompt

from geppetto.server import create_app
from geppetto.simulator import Simulator


@pytest.fixture
def served(geppetto_sim: Simulator, tmp_path: Path) -> Iterator[httpx.Client]:
    app = create_app(sim_profile(geppetto_sim, mode="conversation"), store=str(tmp_path / "s.db"))
    with running_app(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


@pytest.mark.parametrize("mode", ["chained", "conversation"])
def test_a_served_session_goes_stateless_while_the_switch_is_off(
    served: httpx.Client, geppetto_sim: Simulator, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setenv("GEPPETTO_CHAINING", "off")
    sid = new_session(served, mode=mode)
    for text in ("Hello", "And again"):
        started = prompt(served, sid, text)
        assert events_of(served, sid, started["after"])[-1]["data"]["status"] == "completed"
    bodies = [r.body for r in geppetto_sim.requests if r.path == "/v1/responses"]
    assert [len(b["input"]) for b in bodies] == [1, 3]
    assert all("previous_response_id" not in b and "conversation" not in b for b in bodies)
    assert not [r for r in geppetto_sim.requests if r.path.startswith("/v1/conversations")]
    metrics = served.get("/metrics")
    if metrics.status_code == 200:  # prometheus_client installed
        assert "geppetto_responses_chaining_enabled 0.0" in metrics.text
