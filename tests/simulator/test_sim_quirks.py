"""Simulator quirks: each reproduces one way third-party Responses servers depart from OpenAI's."""

from __future__ import annotations

import subprocess
import sys

import httpx
import openai
import pytest
from simhelp import WEATHER_TOOL, sse_events

from geppetto.simulator import QUIRKS, QuirkError, Reply, Simulator, ToolCall, serve
from geppetto.simulator._quirks import foreign_id


def _first(oai: httpx.Client, **extra: object) -> dict[str, object]:
    r = oai.post("/responses", json={"model": "sim-1", "input": "My name is Ada.", **extra})
    assert r.status_code == 200, r.text
    return dict(r.json())


def _chained(oai: httpx.Client, prev: str, **extra: object) -> dict[str, object]:
    body = {"model": "sim-1", "input": "What is my name?", "previous_response_id": prev, **extra}
    r = oai.post("/responses", json=body)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _user_texts(items: list[dict[str, object]]) -> list[str]:
    out = []
    for item in items:
        if item.get("type") == "message" and item.get("role") == "user":
            content = item["content"]
            out.append(content if isinstance(content, str) else content[0]["text"])  # type: ignore[index]
    return out


def test_the_default_echoes_the_id_sent_and_reports_usage(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    assert geppetto_sim.quirks == frozenset()
    first = _first(oai)
    second = _chained(oai, str(first["id"]))
    assert second["previous_response_id"] == first["id"]
    assert isinstance(second["usage"], dict)


@pytest.mark.geppetto_sim_quirks("no-echo")
def test_no_echo_leaves_the_field_out_but_keeps_the_chain(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    first = _first(oai)
    assert "previous_response_id" not in first
    second = _chained(oai, str(first["id"]))
    assert "previous_response_id" not in second
    assert "previous_response_id" not in oai.get(f"/responses/{second['id']}").json()
    # The server kept state: the model saw the first turn.
    assert _user_texts(geppetto_sim.context_items(str(second["id"]))) == ["My name is Ada.", "What is my name?"]
    assert second["usage"]["input_tokens"] > first["usage"]["input_tokens"]  # type: ignore[index]


@pytest.mark.geppetto_sim_quirks("null-echo")
def test_null_echo_always_answers_null(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    first = _first(oai)
    second = _chained(oai, str(first["id"]))
    assert "previous_response_id" in second and second["previous_response_id"] is None
    assert _user_texts(geppetto_sim.context_items(str(second["id"]))) == ["My name is Ada.", "What is my name?"]


@pytest.mark.geppetto_sim_quirks("foreign-echo")
def test_foreign_echo_names_another_id_and_keeps_the_chain(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    first = _first(oai)
    assert first["previous_response_id"] is None  # nothing sent, nothing echoed
    second = _chained(oai, str(first["id"]))
    echoed = second["previous_response_id"]
    assert isinstance(echoed, str) and echoed.startswith("resp_") and echoed != first["id"]
    assert echoed == foreign_id(str(first["id"]))
    assert _user_texts(geppetto_sim.context_items(str(second["id"]))) == ["My name is Ada.", "What is my name?"]


@pytest.mark.geppetto_sim_quirks("forgets")
def test_forgets_answers_from_the_new_input_alone(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    first = _first(oai)
    # Any id is accepted, even one never produced: nothing is looked up.
    second = _chained(oai, str(first["id"]))
    assert second["id"] != first["id"] and str(second["id"]).startswith("resp_")
    assert second["previous_response_id"] is None
    assert _user_texts(geppetto_sim.context_items(str(second["id"]))) == ["What is my name?"]
    # What the server holds for the answer is its own input and output only.
    assert _user_texts(geppetto_sim.held_items(str(second["id"]))) == ["What is my name?"]
    assert geppetto_sim.requests[-1].effects == {"forgot_previous_response": first["id"]}
    # Usage counts the new input alone, as the model read it.
    assert second["usage"]["input_tokens"] <= first["usage"]["input_tokens"] + 2  # type: ignore[index]
    assert _chained(oai, "resp_never_made")["previous_response_id"] is None


@pytest.mark.geppetto_sim_quirks("forgets")
def test_forgets_in_a_stream(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    first = _first(oai)
    r = oai.post(
        "/responses", json={"model": "sim-1", "input": "Who?", "previous_response_id": first["id"], "stream": True}
    )
    final = sse_events(r.text)[-1][1]
    assert final["type"] == "response.completed"
    assert final["response"]["previous_response_id"] is None and final["response"]["id"] != first["id"]
    assert _user_texts(geppetto_sim.context_items(final["response"]["id"])) == ["Who?"]


@pytest.mark.geppetto_sim_quirks("forgets")
def test_forgets_refuses_a_tool_result_whose_call_it_forgot(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    # The model never saw the call: the tool result is an orphan, refused as OpenAI refuses one.
    geppetto_sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, call_id="call_1")]))
    first = _first(oai, tools=[WEATHER_TOOL])
    body = {
        "model": "sim-1",
        "previous_response_id": first["id"],
        "input": [{"type": "function_call_output", "call_id": "call_1", "output": "sunny"}],
        "tools": [WEATHER_TOOL],
    }
    r = oai.post("/responses", json=body)
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "No tool call found for function call output with call_id call_1."


@pytest.mark.geppetto_sim_quirks("no-usage")
def test_no_usage_leaves_usage_out_of_answers_and_streams(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    first = _first(oai)
    assert "usage" not in first
    assert "usage" not in oai.get(f"/responses/{first['id']}").json()
    r = oai.post("/responses", json={"model": "sim-1", "input": "hi", "stream": True})
    responses = [data["response"] for _, data in sse_events(r.text) if "response" in data]
    assert responses and all("usage" not in obj for obj in responses)


def test_quirks_through_the_openai_sdk() -> None:
    with serve(quirks=["no-echo", "no-usage"]) as sim:
        client = openai.OpenAI(api_key="sk-test", base_url=sim.openai_url)
        first = client.responses.create(model="sim-1", input="My name is Ada.")
        second = client.responses.create(model="sim-1", input="And now?", previous_response_id=first.id)
        assert second.previous_response_id is None and second.usage is None
        assert second.output_text
        assert _user_texts(sim.context_items(second.id)) == ["My name is Ada.", "And now?"]


def test_quirks_are_combined_and_reset_returns_to_the_start_ones() -> None:
    with serve(quirks="no-echo, no-usage") as sim:
        assert sim.quirks == {"no-echo", "no-usage"}
        sim.quirks = ["forgets"]
        assert sim.quirks == {"forgets"}
        sim.reset()
        assert sim.quirks == {"no-echo", "no-usage"}


def test_an_unknown_quirk_is_refused_listing_the_valid_ones(geppetto_sim: Simulator) -> None:
    with pytest.raises(QuirkError) as caught:
        serve(quirks=["no-echo", "sometimes-echo"]).__enter__()
    message = str(caught.value)
    assert "'sometimes-echo'" in message and all(name in message for name in QUIRKS)
    with pytest.raises(ValueError, match="valid quirks: no-echo"):
        geppetto_sim.quirks = "bogus"
    assert geppetto_sim.quirks == frozenset()


def test_the_command_line_refuses_an_unknown_quirk() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "geppetto", "simulate", "--port", "0", "--quirks", "no-echo,bogus"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--quirks: unknown quirk 'bogus'; valid quirks: no-echo, null-echo" in done.stderr


@pytest.mark.geppetto_sim_quirks("detail-errors")
def test_detail_errors_answer_in_fastapis_shape(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    r = oai.post("/responses", json={"model": "sim-1", "input": "x", "previous_response_id": "resp_gone"})
    assert r.status_code == 400
    assert r.json() == {"detail": "Previous response with id 'resp_gone' not found."}
    assert oai.get("/responses/resp_gone").json() == {"detail": "Response with id 'resp_gone' not found."}
    assert oai.get("/conversations/conv_gone").json() == {"detail": "Conversation with id 'conv_gone' not found."}
    assert oai.get("/responses/a/b/c").json() == {"detail": "Invalid URL (GET /v1/responses/a/b/c)"}
    # Other APIs keep their own envelopes.
    chat = oai.post("/chat/completions", json={"messages": []})
    assert chat.status_code == 400 and "error" in chat.json()


@pytest.mark.geppetto_sim_quirks("untyped-stream-errors")
def test_untyped_stream_errors_come_inside_a_200_stream(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    body = {"model": "sim-1", "input": "x", "previous_response_id": "resp_gone", "stream": True}
    r = oai.post("/responses", json=body)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert sse_events(r.text) == [(None, {"error": {"message": "Previous response with id 'resp_gone' not found."}})]
    # A request that is not streamed still gets the HTTP error.
    r = oai.post("/responses", json={**body, "stream": False})
    assert r.status_code == 400 and r.json()["error"]["code"] == "previous_response_not_found"
    # The mid-stream error of a failing generation has the same untyped shape.
    geppetto_sim.fail_next(error_after=2)
    events = sse_events(oai.post("/responses", json={"model": "sim-1", "input": "x", "stream": True}).text)
    assert [name for name, _ in events[:2]] == ["response.created", "response.in_progress"]
    assert events[2:] == [
        (None, {"error": {"message": "The server had an error while processing your request. Sorry about that!"}})
    ]


@pytest.mark.geppetto_sim_quirks("no-conversations")
def test_no_conversations_answers_404_on_every_conversations_route(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    r = oai.post("/conversations", json={})
    assert r.status_code == 404
    assert r.json()["error"]["message"] == "Invalid URL (POST /v1/conversations)"
    assert oai.get("/conversations/conv_1/items").status_code == 404
    # A response naming a conversation finds none.
    r = oai.post("/responses", json={"model": "sim-1", "input": "x", "conversation": "conv_1"})
    assert r.status_code == 404
    # Chaining still works.
    first = _first(oai)
    assert _chained(oai, str(first["id"]))["previous_response_id"] == first["id"]


def test_no_conversations_with_detail_errors_is_fastapis_not_found() -> None:
    with serve(quirks=["no-conversations", "detail-errors"]) as sim:
        r = httpx.post(sim.openai_url + "/conversations", json={}, headers={"authorization": "Bearer x"})
        assert (r.status_code, r.json()) == (404, {"detail": "Invalid URL (POST /v1/conversations)"})


@pytest.mark.geppetto_sim_quirks("no-item-events")
def test_no_item_events_streams_text_deltas_and_the_terminal_event(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="Hello there, Ada.", tool_calls=[ToolCall("get_weather", {"city": "Oslo"})]))
    r = oai.post("/responses", json={"model": "sim-1", "input": "hi", "stream": True, "tools": [WEATHER_TOOL]})
    events = sse_events(r.text)
    kinds = [data["type"] for _, data in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert set(kinds[1:-1]) == {"response.output_text.delta"}
    assert "".join(data["delta"] for _, data in events[1:-1]) == "Hello there, Ada."
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    final = events[-1][1]["response"]
    assert [i["type"] for i in final["output"]] == ["message", "function_call"]


@pytest.mark.geppetto_sim_quirks("done-marker")
def test_done_marker_ends_the_stream(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    events = sse_events(oai.post("/responses", json={"model": "sim-1", "input": "hi", "stream": True}).text)
    assert events[-1] == (None, "[DONE]")
    assert events[-2][1]["type"] == "response.completed"
    # The non-streamed answer is unchanged.
    assert _first(oai)["status"] == "completed"


def test_llama_stack_like_combination() -> None:
    """null echo, FastAPI errors, untyped stream errors, no conversations, a [DONE] marker: all at once."""
    quirks = ["null-echo", "detail-errors", "untyped-stream-errors", "no-conversations", "done-marker"]
    with (
        serve(quirks=quirks) as sim,
        httpx.Client(base_url=sim.openai_url, headers={"authorization": "Bearer x"}) as oai,
    ):
        first = _first(oai)
        stream = oai.post(
            "/responses", json={"model": "sim-1", "input": "Who?", "previous_response_id": first["id"], "stream": True}
        )
        events = sse_events(stream.text)
        assert events[-1] == (None, "[DONE]")
        final = events[-2][1]["response"]
        assert final["previous_response_id"] is None
        assert _user_texts(sim.context_items(final["id"])) == ["My name is Ada.", "Who?"]
        assert oai.post("/conversations", json={}).json() == {"detail": "Invalid URL (POST /v1/conversations)"}
