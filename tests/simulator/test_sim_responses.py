"""OpenAI Responses through plain HTTP: creation, chaining, storage, rejections with exact texts, streaming."""

from __future__ import annotations

from typing import Any

import httpx
from simhelp import WEATHER_TOOL, sse_events

from geppetto.simulator import Reply, Simulator, ToolCall


def _error(message: str, param: str | None = "input", code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def test_text_reply_shape_and_usage(oai: httpx.Client) -> None:
    r = oai.post("/responses", json={"model": "sim-1", "input": "Hello there", "instructions": "Be brief"})
    assert r.status_code == 200
    body = r.json()
    assert body["object"] == "response"
    assert body["status"] == "completed"
    assert body["instructions"] == "Be brief"
    assert body["previous_response_id"] is None
    [message] = body["output"]
    assert message["id"].startswith("msg_")
    assert message == {
        "id": message["id"],
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "You said: Hello there", "annotations": [], "logprobs": []}],
    }
    # instructions: 3 + 2 tokens; input item: 3 + 2 tokens; output item: 3 + 5 tokens.
    assert body["usage"] == {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": 8,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 18,
    }


def test_tool_loop_with_chaining(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    first = oai.post(
        "/responses", json={"model": "sim-1", "input": "What is the weather in Paris?", "tools": [WEATHER_TOOL]}
    )
    [call] = first.json()["output"]
    assert (call["type"], call["name"], call["arguments"]) == ("function_call", "get_weather", '{"city":"Paris"}')
    assert call["call_id"].startswith("call_") and call["id"].startswith("fc_")
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "18C and sunny"}
    second = oai.post(
        "/responses", json={"model": "sim-1", "previous_response_id": first.json()["id"], "input": [output]}
    )
    assert second.status_code == 200
    body = second.json()
    assert body["previous_response_id"] == first.json()["id"]
    assert body["output"][0]["content"][0]["text"] == "Here is what the tools returned. get_weather: 18C and sunny."
    context = geppetto_sim.context_items(body["id"])
    assert [i["type"] for i in context] == ["message", "function_call", "function_call_output"]
    assert context[1] == call
    # Chaining reads the same context as a full replay, so input tokens match.
    full = oai.post("/responses", json={"model": "sim-1", "input": [context[0], call, output]})
    assert full.status_code == 200
    assert full.json()["usage"]["input_tokens"] == body["usage"]["input_tokens"]


def test_chained_usage_equals_stateless_replay(oai: httpx.Client) -> None:
    first = oai.post("/responses", json={"model": "sim-1", "input": "Hi", "store": True}).json()
    chained = oai.post(
        "/responses", json={"model": "sim-1", "previous_response_id": first["id"], "input": "Again"}
    ).json()
    replay_input = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": first["output"][0]["content"][0]["text"]},
        {"role": "user", "content": "Again"},
    ]
    stateless = oai.post("/responses", json={"model": "sim-1", "input": replay_input, "store": False}).json()
    assert chained["usage"]["input_tokens"] == stateless["usage"]["input_tokens"]
    assert chained["usage"]["input_tokens"] > first["usage"]["input_tokens"]


def test_stream_event_sequence(oai: httpx.Client) -> None:
    with oai.stream(
        "POST", "/responses", json={"model": "o3", "input": "Hi", "tools": [WEATHER_TOOL], "stream": True}
    ) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r.read().decode())
    names = [name for name, _ in events]
    assert names == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    assert all(data["type"] == name for name, data in events)
    final = events[-1][1]["response"]
    assert final["status"] == "completed"
    reasoning = final["output"][0]
    assert events[3][1]["item"] == reasoning
    assert events[2][1]["item"]["encrypted_content"] != reasoning["encrypted_content"]
    assert "[DONE]" not in [data for _, data in events]


def test_queued_reply_with_tool_calls_streams_arguments(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(tool_calls=[ToolCall("lookup", {"q": "x"}, call_id="call_fixed")]))
    with oai.stream("POST", "/responses", json={"model": "sim-1", "input": "Hi", "stream": True}) as r:
        events = sse_events(r.read().decode())
    added = events[2][1]["item"]
    assert added["arguments"] == "" and added["status"] == "in_progress" and added["call_id"] == "call_fixed"
    deltas = "".join(d["delta"] for n, d in events if n == "response.function_call_arguments.delta")
    assert deltas == '{"q":"x"}'
    done = next(d for n, d in events if n == "response.function_call_arguments.done")
    assert (done["name"], done["arguments"]) == ("lookup", '{"q":"x"}')
    assert events[-1][0] == "response.completed"
