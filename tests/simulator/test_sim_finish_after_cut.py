"""``finish_after_cut``: a stream cut by a fault while the server goes on, finishes and stores the answer
(a response, an interaction, a conversation's items), in progress until then."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from simhelp import sse_events

from geppetto.simulator import Reply, Simulator

HELLO = {"model": "sim-1", "input": "hi", "stream": True}


def _first_id(text: str) -> str:
    events = sse_events(text)
    return str(events[0][1]["response"]["id"])


def _read_until_cut(client: httpx.Client, path: str, body: dict[str, Any], fault: str) -> str:
    got = ""
    try:
        with client.stream("POST", path, json=body, headers={"x-sim-fault": fault}) as r:
            for chunk in r.iter_text():
                got += chunk
    except httpx.RemoteProtocolError:
        pass
    return got


def test_a_cut_response_is_finished_and_stored(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="stored anyway"))
    got = _read_until_cut(oai, "/responses", HELLO, "drop_after=1;finish_after_cut=1")
    stored = oai.get(f"/responses/{_first_id(got)}").json()
    assert stored["status"] == "completed"
    assert stored["output"][0]["content"][0]["text"] == "stored anyway"


def test_until_it_finishes_it_reads_back_in_progress(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    got = _read_until_cut(oai, "/responses", HELLO, "drop_after=1;finish_after_cut=1;finish_delay=0.3")
    rid = _first_id(got)
    running = oai.get(f"/responses/{rid}").json()
    assert (running["status"], running["output"]) == ("in_progress", [])
    deadline = time.monotonic() + 5
    while oai.get(f"/responses/{rid}").json()["status"] != "completed":
        assert time.monotonic() < deadline, "the response never completed"
        time.sleep(0.05)


def test_without_the_flag_a_cut_stores_nothing(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    got = _read_until_cut(oai, "/responses", HELLO, "drop_after=1")
    assert oai.get(f"/responses/{_first_id(got)}").status_code == 404


def test_a_cut_conversation_request_adds_its_items_once(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    conv = oai.post("/conversations", json={}).json()["id"]
    geppetto_sim.queue(Reply(text="kept"))
    _read_until_cut(
        oai, "/responses", {**HELLO, "conversation": conv}, "stall_after=2;stall_seconds=0;finish_after_cut=1"
    )
    items = oai.get(f"/conversations/{conv}/items", params={"order": "asc"}).json()["data"]
    assert [(i["type"], i.get("role")) for i in items] == [("message", "user"), ("message", "assistant")]
    # the conversation is free again: the next request in it is answered
    with oai.stream("POST", "/responses", json={**HELLO, "conversation": conv}) as r:
        assert r.status_code == 200


def test_a_cut_interaction_is_finished_and_stored(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="stored anyway"))
    body = {"model": "gemini-2.5-flash", "input": "hi", "stream": True}
    got = _read_until_cut(gem, "/v1beta/interactions", body, "drop_after=1;finish_after_cut=1;finish_delay=0.2")
    iid = sse_events(got)[0][1]["interaction"]["id"]
    running = gem.get(f"/v1beta/interactions/{iid}").json()
    assert running["status"] == "in_progress"
    follow = gem.post("/v1beta/interactions", json={**body, "previous_interaction_id": iid})
    assert follow.status_code == 400 and "still in progress" in follow.text
    time.sleep(0.3)
    stored = gem.get(f"/v1beta/interactions/{iid}").json()
    assert stored["status"] == "completed"
    assert [s["type"] for s in stored["steps"]][-1] == "model_output"


@pytest.mark.parametrize("header", ["finish_after_cut=maybe", "finish_delay=-1"])
def test_bad_values_are_refused(oai: httpx.Client, header: str) -> None:
    r = oai.post("/responses", json=HELLO, headers={"x-sim-fault": header})
    assert r.status_code == 400 and "x-sim-fault" in r.text
