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


def test_a_limit_hit_mid_tool_loop_saves_the_work_and_refuses_later_prompts_at_once(
    geppetto_sim: Simulator, tmp_path: Path
) -> None:
    """``geppetto serve --profile sim --with-tools --limits max_requests=1``, four prompts asking for the weather:
    one provider request, one tool run, the partial Turn saved with its usage and the limit, the later prompts
    refused before anything starts."""
    app = create_app(
        sim_profile(geppetto_sim),
        store=str(tmp_path / "s.db"),
        tools=demo_registry(),
        limits=UsageLimits.parse("max_requests=1"),
    )
    with running_app(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        sid = str(client.post("/api/sessions", json={}).json()["id"])
        events = _run(client, sid, "What is the weather in Paris?")
        kinds = [e["event"] for e in events]
        assert (kinds.count("tool_call_started"), kinds.count("tool_result")) == (1, 1)
        finished = events[-1]["data"]
        assert finished["status"] == "failed" and "usage limit max_requests=1" in finished["error"]  # type: ignore[index,operator]
        session = client.get(f"/api/sessions/{sid}").json()
        assert session["snapshot_count"] == 1, "the work done before the limit is saved"
        latest = session["latest"]
        assert [b["kind"] for b in latest["blocks"]] == ["user", "tool_call", "tool_use"]
        assert "Paris" in latest["blocks"][2]["payload"]["result"]
        assert latest["metadata"]["geppetto.session_usage@v1"]["requests"] == 1
        stopped = latest["metadata"]["geppetto.stopped_by_limit@v1"]
        assert (stopped["limit"], stopped["value"], stopped["maximum"]) == ("max_requests", 1, 1)
        for text in ("And in Oslo?", "And in Rome?", "And in Tokyo?"):
            refused = client.post(f"/api/sessions/{sid}/messages", json={"text": text})
            assert refused.status_code == 429, refused.text
            error = refused.json()["error"]
            assert error["type"] == "usage_limit_reached"
            assert "POST /api/sessions" in error["message"] and "--limits max_requests=" in error["message"]
            assert "session.limits" not in error["message"], "said in the client's terms, not Python's"
        after = client.get(f"/api/sessions/{sid}").json()
        assert after["snapshot_count"] == 1 and len(after["inferences"]) == 1, "nothing started"
    assert [r.path for r in geppetto_sim.requests].count("/v1/responses") == 1
