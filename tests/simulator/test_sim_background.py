"""OpenAI background responses in the simulator: the recorded event sequence, a cut stream that keeps running
server-side, resume by ``starting_after``, retrieve while it runs (queued, in_progress, completed), cancel,
and every rejection."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from simhelp import sse_events

from geppetto.simulator import Reply, Simulator

LONG = " ".join(f"word{i}" for i in range(30))
RECORDED_REQUEST = {  # the genuine request of the recorded background stream (tests/responses/fixtures)
    "background": True,
    "input": [{"content": "What is 2 + 2?", "role": "user"}],
    "model": "gpt-4o",
    "stream": True,
}


@pytest.fixture
def client(geppetto_sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=geppetto_sim.openai_url, headers={"authorization": "Bearer k"}, timeout=30) as c:
        yield c


def _stream(client: httpx.Client, method: str, url: str, **kw: Any) -> tuple[list[tuple[str | None, Any]], bool]:
    """The events a stream sent, and whether it broke off."""
    text, broken = "", False
    try:
        with client.stream(method, url, **kw) as response:
            assert response.status_code == 200, response.read()
            for chunk in response.iter_text():
                text += chunk
    except httpx.RemoteProtocolError:
        broken = True
    complete = text[: text.rfind("\n\n") + 2] if "\n\n" in text else ""
    return (sse_events(complete) if complete.strip() else []), broken


def _wait_status(client: httpx.Client, rid: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        obj = client.get(f"/responses/{rid}").json()
        if obj["status"] == status or time.monotonic() > deadline:
            return obj
        time.sleep(0.01)


def test_the_recorded_sequence_and_a_cut_stream_that_keeps_running(
    geppetto_sim: Simulator, client: httpx.Client
) -> None:
    geppetto_sim.queue(Reply(text=LONG))
    geppetto_sim.fail_next(drop_after=4)
    events, broken = _stream(client, "POST", "/responses", json=RECORDED_REQUEST)
    assert broken and [name for name, _ in events] == [
        "response.created",
        "response.queued",
        "response.in_progress",
        "response.output_item.added",
    ]
    created = events[0][1]["response"]
    assert (created["status"], created["background"], events[1][1]["response"]["status"]) == ("queued", True, "queued")
    rid = created["id"]
    done = _wait_status(client, rid, "completed")
    assert done["output"][0]["content"][0]["text"] == LONG, "the run went on without its stream"
    # the rest, after the last sequence number received, ends with the terminal event
    rest, broken = _stream(client, "GET", f"/responses/{rid}", params={"stream": "true", "starting_after": 3})
    assert not broken
    assert [data["sequence_number"] for _, data in rest] == list(range(4, 4 + len(rest)))
    assert rest[-1][0] == "response.completed" and rest[-1][1]["response"] == done
    # stored once done: a chained request continues from it
    geppetto_sim.queue(Reply(text="Next."))
    assert (
        client.post("/responses", json={"model": "sim-1", "input": "more", "previous_response_id": rid}).status_code
        == 200
    )


def test_retrieve_while_it_runs_then_cancel(geppetto_sim: Simulator, client: httpx.Client) -> None:
    geppetto_sim.background_pace = 0.03
    geppetto_sim.queue(Reply(reasoning="Thinking first.", text=LONG))
    queued = client.post("/responses", json={"model": "sim-1", "input": "hi", "background": True}).json()
    assert (queued["status"], queued["background"], queued["output"], queued["usage"]) == ("queued", True, [], None)
    rid = queued["id"]
    running = _wait_status(client, rid, "in_progress")
    assert running["status"] == "in_progress" and running["usage"] is None
    deadline = time.monotonic() + 10
    while not client.get(f"/responses/{rid}").json()["output"] and time.monotonic() < deadline:
        time.sleep(0.01)
    cancelled = client.post(f"/responses/{rid}/cancel").json()
    assert cancelled["status"] == "cancelled"
    assert [i["type"] for i in cancelled["output"]] == ["reasoning"]
    assert cancelled["usage"]["output_tokens"] > 0
    time.sleep(0.2)
    assert client.get(f"/responses/{rid}").json() == cancelled, "it stopped where it was"
    assert client.post(f"/responses/{rid}/cancel").json() == cancelled, "cancelling twice changes nothing"
    chained = client.post("/responses", json={"model": "sim-1", "input": "x", "previous_response_id": rid})
    assert chained.status_code == 400 and chained.json()["error"]["code"] == "previous_response_not_found"


def test_a_reset_stops_every_run(geppetto_sim: Simulator, client: httpx.Client) -> None:
    geppetto_sim.background_pace = 0.05
    rid = client.post("/responses", json={"model": "sim-1", "input": "hi", "background": True}).json()["id"]
    geppetto_sim.reset()
    time.sleep(0.2)
    assert client.get(f"/responses/{rid}").status_code == 404
    assert geppetto_sim.background_pace == 0.002 and geppetto_sim.background_resume_window is None


def _error(r: httpx.Response, status: int = 400) -> str:
    assert r.status_code == status, r.text
    return str(r.json()["error"]["message"])


def test_rejections(geppetto_sim: Simulator, client: httpx.Client) -> None:
    body = {"model": "sim-1", "input": "hi"}
    assert "requires 'store' to be true" in _error(
        client.post("/responses", json={**body, "background": True, "store": False})
    )
    foreground = client.post("/responses", json=body).json()["id"]
    assert _error(client.post(f"/responses/{foreground}/cancel")) == "Cannot cancel a synchronous response."
    assert _error(client.post("/responses/resp_nope/cancel"), 404) == "Response with id 'resp_nope' not found."
    assert "only background responses can be streamed again" in _error(
        client.get(f"/responses/{foreground}", params={"stream": "true"})
    )
    unstreamed = client.post("/responses", json={**body, "background": True}).json()["id"]
    assert "was not created with stream=true" in _error(
        client.get(f"/responses/{unstreamed}", params={"stream": "true"})
    )
    geppetto_sim.fail_next(drop_after=1)
    streamed = _stream(client, "POST", "/responses", json={**body, "background": True, "stream": True})[0][0][1]
    rid = streamed["response"]["id"]
    assert "'starting_after': 9999" in _error(
        client.get(f"/responses/{rid}", params={"stream": "true", "starting_after": 9999})
    )
    assert "expected an integer" in _error(
        client.get(f"/responses/{rid}", params={"stream": "true", "starting_after": "x"})
    )
    assert "expected a boolean" in _error(client.get(f"/responses/{rid}", params={"stream": "maybe"}))
    geppetto_sim.background_resume_window = 0
    assert "no longer available" in _error(client.get(f"/responses/{rid}", params={"stream": "true"}))
    assert client.get(f"/responses/{rid}").status_code == 200, "past the window it can still be retrieved"
    with pytest.raises(ValueError, match="background_pace must be"):
        geppetto_sim.background_pace = -1
    with pytest.raises(ValueError, match="background_resume_window must be"):
        geppetto_sim.background_resume_window = -1


@pytest.mark.parametrize(
    ("create", "then"),
    [  # the request sequences of the three recorded background cassettes (tests/responses/fixtures)
        ({"stream": True}, {"starting_after": "0", "stream": "true"}),
        ({"stream": True}, {"stream": "false"}),
        ({"stream": False}, {"stream": "false"}),
    ],
)
def test_the_recorded_request_sequences_are_accepted(
    geppetto_sim: Simulator, client: httpx.Client, create: dict[str, Any], then: dict[str, str]
) -> None:
    body = {**RECORDED_REQUEST, **create}
    if create["stream"]:
        events, broken = _stream(client, "POST", "/responses", json=body)
        assert not broken and events[-1][0] == "response.completed"
        rid = events[0][1]["response"]["id"]
    else:
        created = client.post("/responses", json=body)
        assert created.status_code == 200 and created.json()["status"] == "queued"
        rid = created.json()["id"]
    if then["stream"] == "true":
        events, broken = _stream(client, "GET", f"/responses/{rid}", params=then)
        assert not broken and events[0][1]["sequence_number"] == 1 and events[-1][0] == "response.completed"
    else:
        retrieved = client.get(f"/responses/{rid}", params=then)
        assert retrieved.status_code == 200 and retrieved.json()["id"] == rid
