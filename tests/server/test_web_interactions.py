"""The Turn inspector of a ``geppetto serve`` session on the Gemini Interactions engine, in a real browser
(as ``test_web``): its requests and its next request name their anchor ``previous_interaction_id``, the
field the Interactions API takes, and the report's JSON says which field that is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from server_support import running_app, sim_profile
from test_serve_interactions import _prompt
from test_web import browser, page  # noqa: F401  (fixtures)

from geppetto.server import create_app
from geppetto.simulator import Simulator


def test_the_inspector_names_previous_interaction_id(geppetto_sim: Simulator, tmp_path: Path, page: Any) -> None:  # noqa: F811
    app = create_app(sim_profile(geppetto_sim, "gemini-interactions"), store=str(tmp_path / "s.db"))
    with running_app(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        sid = client.post("/api/sessions", json={}).json()["id"]
        _prompt(client, sid, "hello")
        _prompt(client, sid, "again")
        report = client.get(f"/api/sessions/{sid}/inspect").json()
        p = page.page
        p.goto(f"{url}/#/inspect/{sid}")
        p.locator("#requests tbody tr").nth(1).wait_for()
        rows = p.locator("#requests tbody tr")
        rows.nth(1).get_by_role("button").click()
        detail = p.locator("#request-detail").inner_text()
        next_request = p.locator("#next-request").inner_text()
        page.shot("inspector")
    anchor = [r.body for r in geppetto_sim.requests if r.path == "/v1beta/interactions"][1]["previous_interaction_id"]
    assert [r["anchor_field"] for r in report["requests"]] == ["previous_interaction_id"] * 2
    assert report["chained"]["anchor_field"] == "previous_interaction_id"
    assert report["chained"]["next"]["anchor_field"] == "previous_interaction_id"
    assert f"previous_interaction_id {anchor}" in detail and "previous_response_id" not in detail
    assert next_request.startswith("chained: the server holds all ") and "the next prompt is sent alone" in next_request
    assert next_request.endswith(", with previous_interaction_id=" + report["chained"]["next"]["anchor"]), next_request
