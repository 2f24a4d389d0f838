"""``geppetto serve`` with two worker processes on one PostgreSQL store and one Redis bus, an engine (reading
background responses, or streaming its answers) and a tool: the worker running an inference is killed (SIGKILL) after the tool returned and before the next
request reached the provider; the other worker finishes the run from the journal, and the tool ran exactly
once (it counts its runs in a file), each event delivered once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import Worker, bus_url, sse_events, two_script_workers

from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import BLOCK_META_RESPONSE_ID

SCRIPT = str(Path(__file__).with_name("journal_worker.py"))


@pytest.fixture(params=["background", "plain"])
def two_workers(
    request: pytest.FixtureRequest, postgres_target: str, geppetto_sim: Simulator, tmp_path: Path
) -> Iterator[tuple[Worker, Worker, Path, Path]]:
    """Two workers whose engine reads background responses, or streams its answers (``plain``)."""
    runs, hold = tmp_path / "runs.txt", tmp_path / "hold"
    args = [SCRIPT, postgres_target, bus_url("redis"), geppetto_sim.openai_url, str(runs), str(hold)]
    args += ["plain"] if request.param == "plain" else []
    with two_script_workers(*args) as (a, b):
        yield a, b, runs, hold


def _until(url: str, sid: str, last_id: str, stop: str | None = None) -> list[dict[str, Any]]:
    """The session's events after ``last_id`` up to ``run_finished``, or up to the first ``stop`` event."""
    out: list[dict[str, Any]] = []
    with httpx.stream(
        "GET",
        f"{url}/api/sessions/{sid}/events",
        params={"until": "finished"},
        headers={"Last-Event-ID": last_id},
        timeout=60,
    ) as response:
        assert response.status_code == 200
        for event in sse_events(response.iter_lines()):
            out.append(event)
            if event["event"] == stop:
                break
    return out


def test_a_worker_killed_after_a_tool_returned_leaves_it_run_once(
    two_workers: tuple[Worker, Worker, Path, Path], geppetto_sim: Simulator
) -> None:
    a, b, runs, hold = two_workers
    geppetto_sim.background_pace = 0.01
    geppetto_sim.queue(
        Reply(tool_calls=[ToolCall("weather", {"city": "Paris"}, call_id="call_paris")]),
        Reply(text="It is sunny in Paris."),
    )
    sid = httpx.post(f"{b.url}/api/sessions", json={}).json()["id"]
    started = httpx.post(f"{a.url}/api/sessions/{sid}/messages", json={"text": "Weather in Paris?"}).json()
    before = _until(b.url, sid, started["after"], stop="tool_result")
    a.kill()  # its next request waits for the file `hold`: it never reached the provider
    hold.touch()
    assert runs.read_text() == "Paris\n"
    assert [r.method for r in geppetto_sim.requests] == ["POST"]
    after = _until(b.url, sid, before[-1]["id"])
    events = before + after
    ids = [e["id"] for e in events]
    assert len(ids) == len(set(ids)), "no event twice"
    kinds = [e["event"] for e in events]
    assert kinds == [
        "run_started",
        *("start", "tool_call", "final", "tool_call_started", "tool_result"),  # worker a
        *("start", *["text_delta"] * kinds.count("text_delta"), "final", "run_finished"),  # worker b
    ]
    finished = events[-1]
    assert (finished["event"], finished["data"]["status"]) == ("run_finished", "completed")
    assert finished["data"]["inference_id"] == started["inference_id"]
    assert runs.read_text() == "Paris\n", "the tool ran exactly once: the other worker read its journaled result"
    first, second = geppetto_sim.requests
    assert (first.method, second.method, second.path) == ("POST", "POST", "/v1/responses")
    assert [item["type"] for item in second.body["input"]] == ["function_call_output"], "only the tool result"
    deadline = time.monotonic() + 10
    while httpx.get(f"{b.url}/api/sessions/{sid}").json()["status"] != "idle" and time.monotonic() < deadline:
        time.sleep(0.05)
    session = httpx.get(f"{b.url}/api/sessions/{sid}").json()
    blocks = session["latest"]["blocks"]
    assert [(blk["kind"], blk["payload"].get("result", blk["payload"].get("text"))) for blk in blocks] == [
        ("user", "Weather in Paris?"),
        ("tool_call", None),
        ("tool_use", "sunny in Paris"),
        ("llm_text", "It is sunny in Paris."),
    ]
    assert [i["status"] for i in session["inferences"]] == ["completed"]
    # chained on the response that made the call, as worker a would have
    assert second.body["previous_response_id"] == blocks[1]["metadata"][str(BLOCK_META_RESPONSE_ID)]
