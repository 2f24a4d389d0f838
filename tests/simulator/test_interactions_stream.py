"""The simulator's Gemini Interactions API as server-sent events: event ids, resuming a stream from an
event, background interactions, cancel, faults, and the official google-genai client against it."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from simhelp import WEATHER_FUNCTION as WEATHER
from simhelp import sse_events

from geppetto.simulator import Simulator
from interactions_types import validate_error, validate_event, validate_interaction, validate_request

MODEL = "gemini-3-flash-preview"


def events_of(text: str) -> list[dict[str, Any]]:
    """The events of an SSE body, each validated, with the SSE event name equal to its event_type."""
    out = []
    for name, data in sse_events(text):
        validate_event(data)
        assert name == data["event_type"]
        out.append(data)
    return out


def stream_create(client: httpx.Client, body: dict[str, Any], **headers: str) -> list[dict[str, Any]]:
    body = {**body, "stream": True}
    validate_request(body)
    response = client.post("/v1beta/interactions", json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return events_of(response.text)


def assemble(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps a client builds from step.start and step.delta events."""
    steps: dict[int, dict[str, Any]] = {}
    for event in events:
        if event["event_type"] == "step.start":
            steps[event["index"]] = dict(event["step"])
        elif event["event_type"] == "step.delta":
            step, delta = steps[event["index"]], event["delta"]
            if delta["type"] == "text":
                content = step.setdefault("content", [{"type": "text", "text": ""}])
                content[0]["text"] += delta["text"]
            elif delta["type"] == "arguments_delta":
                step["arguments"] = json.loads(delta["arguments"])
            elif delta["type"] == "thought_signature":
                step["signature"] = delta["signature"]
            elif delta["type"] == "thought_summary":
                step.setdefault("summary", []).append(delta["content"])
    return [steps[i] for i in sorted(steps)]


def wait_for(client: httpx.Client, interaction_id: str, status: str) -> dict[str, Any]:
    for _ in range(1000):
        body = client.get(f"/v1beta/interactions/{interaction_id}").json()
        validate_interaction(body)
        if body["status"] == status:
            return body  # type: ignore[no-any-return]
        time.sleep(0.01)
    raise AssertionError(f"interaction {interaction_id} never reached {status}")


def test_a_stream_carries_the_same_interaction_with_event_ids(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    events = stream_create(gem, {"model": MODEL, "input": "Weather in Paris?", "tools": [WEATHER]})
    kinds = [e["event_type"] for e in events]
    assert kinds[:2] == ["interaction.created", "interaction.status_update"]
    assert kinds[-2:] == ["interaction.status_update", "interaction.completed"]
    ids = [e["event_id"] for e in events]
    assert len(set(ids)) == len(ids)
    created, completed = events[0]["interaction"], events[-1]["interaction"]
    assert created["status"] == "in_progress" and completed["status"] == "requires_action"
    assert completed["usage"]["total_input_tokens"] > 0
    steps = assemble(events)
    assert [s["type"] for s in steps] == ["thought", "function_call"]
    stored = gem.get(f"/v1beta/interactions/{created['id']}").json()
    assert stored["steps"][1:] == steps  # the stored steps are what the stream said
    assert geppetto_sim.held_steps(created["id"])[1:] == steps


def test_get_with_stream_replays_and_resumes_after_an_event(gem: httpx.Client) -> None:
    events = stream_create(gem, {"model": MODEL, "input": "Tell me something long enough to chunk, please."})
    iid = events[0]["interaction"]["id"]
    again = gem.get(f"/v1beta/interactions/{iid}", params={"stream": "true"})
    assert events_of(again.text) == events
    resumed = gem.get(f"/v1beta/interactions/{iid}", params={"stream": "true", "last_event_id": events[3]["event_id"]})
    assert events_of(resumed.text) == events[4:]
    bad = gem.get(f"/v1beta/interactions/{iid}", params={"stream": "true", "last_event_id": "nope"})
    assert bad.status_code == 400 and validate_error(bad.json())
    other = stream_create(gem, {"model": MODEL, "input": "other"})
    foreign = gem.get(f"/v1beta/interactions/{iid}", params={"stream": "true", "last_event_id": other[1]["event_id"]})
    assert foreign.status_code == 400
    no_stream = gem.get(f"/v1beta/interactions/{iid}", params={"last_event_id": events[3]["event_id"]})
    assert no_stream.status_code == 400 and "stream=true" in no_stream.json()["error"]["message"]


def test_a_dropped_stream_stores_nothing_and_an_error_event_validates(gem: httpx.Client) -> None:
    body = {"model": MODEL, "input": "hello", "stream": True}
    response = gem.post("/v1beta/interactions", json=body, headers={"x-sim-fault": "error_after=3"})
    events = events_of(response.text)
    assert events[-1]["event_type"] == "error" and events[-1]["error"]["code"] == "unavailable"
    iid = events[0]["interaction"]["id"]
    assert gem.get(f"/v1beta/interactions/{iid}").status_code == 404


def test_background_interaction_runs_on_and_is_stored_when_done(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    response = gem.post("/v1beta/interactions", json={"model": MODEL, "input": "slow one", "background": True})
    body = response.json()
    validate_interaction(body)
    assert body["status"] == "in_progress" and body["steps"] == []
    done = wait_for(gem, body["id"], "completed")
    assert done["steps"][0]["type"] == "user_input" and done["usage"]["total_tokens"] > 0
    assert geppetto_sim.held_steps(body["id"]) == done["steps"]
    follow = gem.post(
        "/v1beta/interactions", json={"model": MODEL, "input": "next", "previous_interaction_id": body["id"]}
    )
    assert follow.status_code == 200


def test_background_stream_cut_then_resumed_from_the_last_event(gem: httpx.Client) -> None:
    body = {"model": MODEL, "input": "stream in the background", "background": True, "stream": True}
    with gem.stream("POST", "/v1beta/interactions", json=body, headers={"x-sim-fault": "drop_after=4"}) as response:
        received = b""
        with pytest.raises(httpx.RemoteProtocolError):
            for chunk in response.iter_bytes():
                received += chunk
    first = events_of(received.decode())
    assert len(first) == 4
    iid = first[0]["interaction"]["id"]
    rest = gem.get(f"/v1beta/interactions/{iid}", params={"stream": "true", "last_event_id": first[-1]["event_id"]})
    events = first + events_of(rest.text)
    assert events[-1]["event_type"] == "interaction.completed"
    whole = gem.get(f"/v1beta/interactions/{iid}", params={"stream": "true"})
    assert events_of(whole.text) == events
    assert gem.get(f"/v1beta/interactions/{iid}").json()["steps"][1:] == assemble(events)


def test_cancel_stops_a_background_interaction(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.background_pace = 3600.0  # it never gets past its start
    body = gem.post("/v1beta/interactions", json={"model": MODEL, "input": "x", "background": True}).json()
    cancelled = gem.post(f"/v1beta/interactions/{body['id']}/cancel")
    assert cancelled.status_code == 200
    validate_interaction(cancelled.json())
    assert cancelled.json()["status"] == "cancelled" and cancelled.json()["steps"] == []
    assert gem.post(f"/v1beta/interactions/{body['id']}/cancel").json()["status"] == "cancelled"  # idempotent
    assert gem.get(f"/v1beta/interactions/{body['id']}").json()["status"] == "cancelled"
    chained = gem.post(
        "/v1beta/interactions", json={"model": MODEL, "input": "y", "previous_interaction_id": body["id"]}
    )
    assert chained.status_code == 404
    with pytest.raises(KeyError):
        geppetto_sim.held_steps(body["id"])


def test_cancel_of_a_foreground_or_unknown_interaction(gem: httpx.Client) -> None:
    body = gem.post("/v1beta/interactions", json={"model": MODEL, "input": "x"}).json()
    response = gem.post(f"/v1beta/interactions/{body['id']}/cancel")
    assert response.status_code == 400 and validate_error(response.json())
    response = gem.post("/v1beta/interactions/v1_nope/cancel")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_delete_stops_a_running_background_interaction(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.background_pace = 3600.0
    body = gem.post("/v1beta/interactions", json={"model": MODEL, "input": "x", "background": True}).json()
    assert gem.delete(f"/v1beta/interactions/{body['id']}").json() == {}
    assert gem.get(f"/v1beta/interactions/{body['id']}").status_code == 404


def test_the_official_client_speaks_to_the_simulator(geppetto_sim: Simulator) -> None:
    genai = pytest.importorskip("google.genai")
    client = genai.Client(api_key="k", http_options={"base_url": geppetto_sim.url})
    first = client.interactions.create(model=MODEL, input="Hello")
    assert first.status == "completed" and first.output_text == "You said: Hello"
    second = client.interactions.create(model=MODEL, input="Again", previous_interaction_id=first.id)
    assert second.output_text == "You said: Again"
    kinds = [e.event_type for e in client.interactions.create(model=MODEL, input="Stream", stream=True)]
    assert kinds[0] == "interaction.created" and kinds[-1] == "interaction.completed"
    assert len(client.interactions.get(second.id).steps) == 3
    client.interactions.delete(second.id)
    with pytest.raises(Exception, match="not found"):
        client.interactions.get(second.id)
    assert geppetto_sim.requests[-1].path == f"/v1/interactions/{second.id}"


def test_continuing_a_running_background_interaction_is_refused(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.background_pace = 3600.0
    body = gem.post("/v1beta/interactions", json={"model": MODEL, "input": "x", "background": True}).json()
    chained = gem.post(
        "/v1beta/interactions", json={"model": MODEL, "input": "y", "previous_interaction_id": body["id"]}
    )
    assert chained.status_code == 400 and "still in progress" in chained.json()["error"]["message"]
    validate_error(chained.json())


def test_past_the_resume_window_a_background_stream_is_gone(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.background_resume_window = 0.0
    body = gem.post("/v1beta/interactions", json={"model": MODEL, "input": "x", "background": True}).json()
    response = gem.get(f"/v1beta/interactions/{body['id']}", params={"stream": "true"})
    assert response.status_code == 400 and "no longer available" in response.json()["error"]["message"]
    assert gem.get(f"/v1beta/interactions/{body['id']}").status_code == 200


def test_a_streamed_thought_summary_and_signature_arrive_as_deltas(gem: httpx.Client) -> None:
    config = {"thinking_summaries": "auto", "thinking_level": "low"}
    events = stream_create(gem, {"model": MODEL, "input": "Think first", "generation_config": config})
    iid = events[0]["interaction"]["id"]
    deltas = [e["delta"]["type"] for e in events if e["event_type"] == "step.delta"]
    assert deltas[:2] == ["thought_summary", "thought_signature"] and set(deltas[2:]) == {"text"}
    stored = gem.get(f"/v1beta/interactions/{iid}").json()
    assert stored["steps"][1:] == assemble(events)
    assert events[-1]["interaction"]["usage"]["total_thought_tokens"] > 0


def test_an_injected_status_answers_in_the_interactions_envelope(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(429, retry_after=2)
    response = gem.post("/v1beta/interactions", json={"model": MODEL, "input": "x"})
    assert response.status_code == 429 and response.headers["retry-after"] == "2"
    validate_error(response.json())
    assert response.json()["error"]["code"] == "rate_limit_exceeded"
    geppetto_sim.fail_next(503)
    response = gem.post("/v1beta/interactions", json={"model": MODEL, "input": "x"})
    assert response.status_code == 503 and validate_error(response.json())
