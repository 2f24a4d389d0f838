"""The simulator's Responses WebSocket mode (``ws://.../v1/responses``): ``response.create`` messages, the
SSE events as JSON messages, connection-local state for ``store: false``, errors, closes, idle timeout."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from geppetto.simulator import Simulator

sync_client = pytest.importorskip("websockets.sync.client")
ConnectionClosed = pytest.importorskip("websockets.exceptions").ConnectionClosed

AUTH = {"authorization": "Bearer sk-test"}


def connect(sim: Simulator) -> Any:
    return sync_client.connect(sim.websocket_url, additional_headers=AUTH, open_timeout=5)


def create(ws: Any, text: str, **fields: Any) -> list[dict[str, Any]]:
    """Send one response.create; the events up to the terminal one (or the error event)."""
    ws.send(json.dumps({"type": "response.create", "model": "sim-1", "input": text, **fields}))
    events = []
    while True:
        event = json.loads(ws.recv(timeout=5))
        events.append(event)
        if event["type"] in ("response.completed", "response.incomplete", "error"):
            return events


def texts(items: list[dict[str, Any]]) -> list[str]:
    out = []
    for item in items:
        content = item.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [str(p.get("text")) for p in content if isinstance(p, dict) and p.get("text")]
    return out


def test_events_are_the_sse_events_as_json_messages(geppetto_sim: Simulator) -> None:
    with connect(geppetto_sim) as ws:
        events = create(ws, "hello")
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    recorded = [r for r in geppetto_sim.requests if r.method == "WS"]
    assert len(recorded) == 1 and recorded[0].path == "/v1/responses"
    assert recorded[0].body["type"] == "response.create" and recorded[0].query["connection"].startswith("wsconn_")


def test_store_false_chains_on_its_own_connection(geppetto_sim: Simulator) -> None:
    with connect(geppetto_sim) as ws:
        first = create(ws, "my name is Ada", store=False)[-1]["response"]
        second = create(ws, "what is my name?", store=False, previous_response_id=first["id"])[-1]["response"]
    assert second["previous_response_id"] == first["id"] and second["store"] is False
    seen = texts(geppetto_sim.context_items(second["id"]))
    assert seen[0] == "my name is Ada" and seen[-1] == "what is my name?"
    assert first["id"] not in geppetto_sim.state.responses  # never stored: it lived on the socket only


def test_store_false_anchor_is_not_found_on_another_connection(geppetto_sim: Simulator) -> None:
    with connect(geppetto_sim) as ws:
        first = create(ws, "one", store=False)[-1]["response"]
    with connect(geppetto_sim) as ws:
        events = create(ws, "two", store=False, previous_response_id=first["id"])
        assert events == [
            {
                "type": "error",
                "status": 400,
                "error": {
                    "type": "invalid_request_error",
                    "code": "previous_response_not_found",
                    "message": f"Previous response with id '{first['id']}' not found.",
                    "param": "previous_response_id",
                },
            }
        ]
        # an error leaves the connection open: the whole context as a fresh request works
        assert create(ws, "one two", store=False)[-1]["type"] == "response.completed"


def test_only_the_latest_response_of_a_connection_is_cached(geppetto_sim: Simulator) -> None:
    with connect(geppetto_sim) as ws:
        first = create(ws, "one", store=False)[-1]["response"]
        create(ws, "two", store=False, previous_response_id=first["id"])
        events = create(ws, "fork", store=False, previous_response_id=first["id"])
    assert events[-1]["type"] == "error" and events[-1]["error"]["code"] == "previous_response_not_found"


def test_store_true_chains_from_any_connection(geppetto_sim: Simulator) -> None:
    with connect(geppetto_sim) as ws:
        first = create(ws, "remember blue")[-1]["response"]
    with connect(geppetto_sim) as ws:
        second = create(ws, "what colour?", previous_response_id=first["id"])[-1]
    assert second["type"] == "response.completed"
    assert texts(geppetto_sim.context_items(second["response"]["id"]))[0] == "remember blue"


def test_an_error_arrives_on_the_socket_and_the_connection_stays(geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(500)
    with connect(geppetto_sim) as ws:
        error = create(ws, "hi")[-1]
        assert error["type"] == "error" and error["status"] == 500 and error["error"]["type"] == "server_error"
        assert create(ws, "hi")[-1]["type"] == "response.completed"
        ws.send(json.dumps({"type": "response.nonsense"}))
        bad = json.loads(ws.recv(timeout=5))
        assert bad["type"] == "error" and bad["error"]["param"] == "type"
        background = create(ws, "hi", background=True)[-1]
        assert background["type"] == "error" and background["error"]["param"] == "background"


def test_the_server_closes_connections(geppetto_sim: Simulator) -> None:
    with connect(geppetto_sim) as ws:
        create(ws, "hi")
        assert geppetto_sim.drop_websockets() == 1
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
    deadline = time.monotonic() + 5
    while geppetto_sim.websockets and time.monotonic() < deadline:
        time.sleep(0.01)
    assert geppetto_sim.websockets == []


def test_a_dropped_stream_closes_the_connection(geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(drop_after=2)
    with connect(geppetto_sim) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "sim-1", "input": "hi"}))
        got = []
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                got.append(json.loads(ws.recv(timeout=5))["type"])
    assert got == ["response.created", "response.in_progress"]
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011


def test_idle_connections_are_closed(geppetto_sim: Simulator) -> None:
    geppetto_sim.ws_idle_timeout = 0.2
    with connect(geppetto_sim) as ws:
        create(ws, "hi")  # activity resets nothing but the wait for the next message
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
    assert closed.value.rcvd is not None and (closed.value.rcvd.code, closed.value.rcvd.reason) == (
        1000,
        "idle timeout",
    )


def test_the_connection_age_limit(geppetto_sim: Simulator) -> None:
    geppetto_sim.ws_max_age = 0.1
    with connect(geppetto_sim) as ws:
        time.sleep(0.2)
        error = create(ws, "hi")[-1]
        assert error["error"]["code"] == "websocket_connection_limit_reached"
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=5)


def test_a_connection_without_a_key_is_refused(geppetto_sim: Simulator) -> None:
    with pytest.raises(Exception) as refused, sync_client.connect(geppetto_sim.websocket_url, open_timeout=5) as ws:
        ws.recv(timeout=5)
    assert "403" in str(refused.value) or "1008" in str(refused.value)
