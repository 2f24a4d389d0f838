"""OpenAI Conversations API through plain HTTP, and /responses with a conversation."""

from __future__ import annotations

import time

import httpx

from geppetto.simulator import Simulator


def test_conversation_lifecycle(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    conv = oai.post(
        "/conversations", json={"items": [{"role": "user", "content": "hi"}], "metadata": {"topic": "demo"}}
    ).json()
    assert conv == {
        "id": conv["id"],
        "object": "conversation",
        "created_at": conv["created_at"],
        "metadata": {"topic": "demo"},
    }
    assert oai.get(f"/conversations/{conv['id']}").json() == conv
    updated = oai.post(f"/conversations/{conv['id']}", json={"metadata": {"topic": "x"}}).json()
    assert updated["metadata"] == {"topic": "x"}

    response = oai.post("/responses", json={"model": "sim-1", "conversation": conv["id"], "input": "next"}).json()
    assert response["conversation"] == {"id": conv["id"]}
    assert [i["type"] for i in geppetto_sim.context_items(response["id"])] == ["message", "message"]
    listed = oai.get(f"/conversations/{conv['id']}/items", params={"order": "asc"}).json()
    texts = [i["content"][0]["text"] for i in listed["data"]]
    assert texts == ["hi", "next", "You said: next"]
    assert all(i["status"] == "completed" for i in listed["data"])
    desc = oai.get(f"/conversations/{conv['id']}/items", params={"limit": 2}).json()
    assert [i["id"] for i in desc["data"]] == [listed["data"][2]["id"], listed["data"][1]["id"]]
    assert desc["has_more"] is True

    added = oai.post(f"/conversations/{conv['id']}/items", json={"items": [{"role": "user", "content": "more"}]}).json()
    item_id = added["data"][0]["id"]
    assert added["first_id"] == added["last_id"] == item_id
    assert oai.get(f"/conversations/{conv['id']}/items/{item_id}").json() == added["data"][0]
    assert oai.delete(f"/conversations/{conv['id']}/items/{item_id}").json()["object"] == "conversation"
    assert oai.get(f"/conversations/{conv['id']}/items/{item_id}").status_code == 404
    assert oai.delete(f"/conversations/{conv['id']}").json() == {
        "id": conv["id"],
        "object": "conversation.deleted",
        "deleted": True,
    }
    missing = oai.get(f"/conversations/{conv['id']}")
    assert (missing.status_code, missing.json()["error"]["message"]) == (
        404,
        f"Conversation with id '{conv['id']}' not found.",
    )


def test_conversation_rejections(oai: httpx.Client) -> None:
    conv = oai.post("/conversations", json={}).json()
    r = oai.post(f"/conversations/{conv['id']}", json={})
    assert r.status_code == 400
    assert r.json()["error"] == {
        "message": "Missing required parameter: 'metadata'.",
        "type": "invalid_request_error",
        "param": "metadata",
        "code": "missing_required_parameter",
    }
    too_many = [{"role": "user", "content": str(i)} for i in range(21)]
    r = oai.post(f"/conversations/{conv['id']}/items", json={"items": too_many})
    assert (r.status_code, r.json()["error"]["param"]) == (400, "items")
    r = oai.get(f"/conversations/{conv['id']}/items", params={"order": "sideways"})
    assert r.status_code == 400


def test_conversation_locked_while_a_response_is_in_flight(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    conv = oai.post("/conversations", json={}).json()
    geppetto_sim.fail_next(stall_after=1, stall_seconds=1.0)
    body = {"model": "sim-1", "conversation": conv["id"], "input": "slow", "stream": True}
    with oai.stream("POST", "/responses", json=body) as stalled:
        assert stalled.status_code == 200
        next(stalled.iter_lines())  # the first event arrived; the response is now in flight
        r = oai.post("/responses", json={"model": "sim-1", "conversation": conv["id"], "input": "fast"})
        assert r.status_code == 400
        assert r.json()["error"] == {
            "message": "Another process is currently operating on this conversation. Please retry in a few seconds.",
            "type": "invalid_request_error",
            "param": "conversation",
            "code": "conversation_locked",
        }
    # The stalled response was never completed, so nothing was appended and the lock is released afterwards.
    for _ in range(100):
        r = oai.post("/responses", json={"model": "sim-1", "conversation": conv["id"], "input": "fast"})
        if r.status_code == 200:
            break
        time.sleep(0.05)  # the stall ends after stall_seconds, then the lock is released
    assert r.status_code == 200
    items = oai.get(f"/conversations/{conv['id']}/items", params={"order": "asc"}).json()["data"]
    assert [i["content"][0]["text"] for i in items] == ["fast", "You said: fast"]
