"""The simulator's Gemini Interactions API: create, chaining by previous_interaction_id, store, get, delete,
function calls and results, thought signatures, usage, structured output and errors. Every request and
answer is checked against the google-genai types, strictly."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from simhelp import WEATHER_FUNCTION as WEATHER

from geppetto.simulator import Reply, Simulator, ToolCall
from interactions_types import (
    StrictTypeError,
    validate_error,
    validate_interaction,
    validate_request,
)

MODEL = "gemini-2.5-flash"
THINKING = "gemini-3-flash-preview"


def create(client: httpx.Client, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
    """POST a validated body; the validated answer (or error body) at ``status``."""
    validate_request(body)
    response = client.post("/v1beta/interactions", json=body)
    assert response.status_code == status, response.text
    if status == 200:
        validate_interaction(response.json())
    else:
        validate_error(response.json())
    return response.json()  # type: ignore[no-any-return]


def get(client: httpx.Client, interaction_id: str, status: int = 200, **params: Any) -> dict[str, Any]:
    response = client.get(f"/v1beta/interactions/{interaction_id}", params=params)
    assert response.status_code == status, response.text
    (validate_interaction if status == 200 else validate_error)(response.json())
    return response.json()  # type: ignore[no-any-return]


def user(text: str) -> dict[str, Any]:
    return {"type": "user_input", "content": [{"type": "text", "text": text}]}


def test_create_text_answer_with_usage_and_the_stored_steps(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    body = create(gem, {"model": MODEL, "input": "Hello there"})
    assert body["id"].startswith("v1_")
    assert body["status"] == "completed"
    assert body["model"] == MODEL
    assert body["steps"] == [{"type": "model_output", "content": [{"type": "text", "text": "You said: Hello there"}]}]
    usage = body["usage"]
    assert usage["total_input_tokens"] > 0 and usage["total_output_tokens"] > 0
    assert usage["total_tokens"] == usage["total_input_tokens"] + usage["total_output_tokens"]
    # GET shows the user's input step too; create shows only the model's steps.
    stored = get(gem, body["id"])
    assert stored["steps"] == [user("Hello there"), *body["steps"]]
    assert "input" not in stored
    assert get(gem, body["id"], include_input="true")["input"] == "Hello there"
    assert geppetto_sim.held_steps(body["id"]) == [user("Hello there"), *body["steps"]]
    assert geppetto_sim.context_items(body["id"]) == [user("Hello there")]


def test_previous_interaction_id_continues_the_server_history(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    first = create(gem, {"model": MODEL, "input": "first", "system_instruction": "Be brief."})
    second = create(gem, {"model": MODEL, "input": "second", "previous_interaction_id": first["id"]})
    assert second["previous_interaction_id"] == first["id"]
    assert geppetto_sim.context_items(second["id"]) == [user("first"), *first["steps"], user("second")]
    assert geppetto_sim.held_steps(second["id"]) == [user("first"), *first["steps"], user("second"), *second["steps"]]
    # The history stays whole when an earlier interaction goes: each stored interaction keeps its own.
    geppetto_sim.forget(first["id"])
    third = create(gem, {"model": MODEL, "input": "third", "previous_interaction_id": second["id"]})
    assert len(geppetto_sim.context_items(third["id"])) == 5
    assert get(gem, second["id"])["steps"] == [user("second"), *second["steps"]]


def test_store_false_keeps_nothing(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    body = create(gem, {"model": MODEL, "input": "hi", "store": False})
    assert body["status"] == "completed"
    error = get(gem, body["id"], status=404)
    assert error["error"]["code"] == "not_found"
    error = create(gem, {"model": MODEL, "input": "again", "previous_interaction_id": body["id"]}, status=404)
    assert error == {"error": {"code": "not_found", "message": f"Interaction '{body['id']}' not found."}}
    with pytest.raises(KeyError, match=body["id"]):
        geppetto_sim.held_steps(body["id"])
    # A stateless request sends the whole history itself.
    full = [user("hi"), *body["steps"], user("again")]
    again = create(gem, {"model": MODEL, "input": full, "store": False})
    assert geppetto_sim.context_items(again["id"]) == full


def test_unknown_and_expired_ids_answer_not_found(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    assert get(gem, "v1_nope", status=404) == {
        "error": {"code": "not_found", "message": "Interaction 'v1_nope' not found."}
    }
    body = create(gem, {"model": MODEL, "input": "hi"})
    geppetto_sim.forget(body["id"])  # as if it expired
    create(gem, {"model": MODEL, "input": "more", "previous_interaction_id": body["id"]}, status=404)
    get(gem, body["id"], status=404)
    assert gem.delete(f"/v1beta/interactions/{body['id']}").status_code == 404


def test_delete_forgets_the_interaction(gem: httpx.Client) -> None:
    body = create(gem, {"model": MODEL, "input": "hi"})
    response = gem.delete(f"/v1beta/interactions/{body['id']}")
    assert response.status_code == 200 and response.json() == {}
    get(gem, body["id"], status=404)
    create(gem, {"model": MODEL, "input": "x", "previous_interaction_id": body["id"]}, status=404)


def test_function_call_then_result_by_previous_interaction(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    first = create(gem, {"model": MODEL, "input": "What is the weather in Paris?", "tools": [WEATHER]})
    assert first["status"] == "requires_action"
    [call] = first["steps"]
    assert call["type"] == "function_call" and call["name"] == "get_weather"
    assert call["arguments"] == {"city": "Paris"} or set(call["arguments"]) == {"city"}
    result = {"type": "function_result", "call_id": call["id"], "name": "get_weather", "result": "Sunny, 21 C"}
    second = create(
        gem, {"model": MODEL, "input": [result], "tools": [WEATHER], "previous_interaction_id": first["id"]}
    )
    assert second["status"] == "completed"
    assert "Sunny, 21 C" in second["steps"][-1]["content"][0]["text"]
    assert geppetto_sim.held_steps(second["id"]) == [
        user("What is the weather in Paris?"),
        call,
        result,
        *second["steps"],
    ]


def test_thinking_model_signs_its_thought_and_checks_it_when_sent_back(
    gem: httpx.Client, geppetto_sim: Simulator
) -> None:
    first = create(
        gem,
        {
            "model": THINKING,
            "input": "Weather in Rome?",
            "tools": [WEATHER],
            "generation_config": {"thinking_summaries": "auto"},
        },
    )
    thought, call = first["steps"]
    assert thought["type"] == "thought" and thought["signature"] and thought["summary"][0]["type"] == "text"
    assert first["usage"]["total_thought_tokens"] > 0
    usage = first["usage"]
    assert (
        usage["total_tokens"]
        == usage["total_input_tokens"] + usage["total_output_tokens"] + usage["total_thought_tokens"]
    )
    result = {"type": "function_result", "call_id": call["id"], "result": "Cloudy"}
    history = [user("Weather in Rome?"), thought, call, result]
    ok = create(gem, {"model": THINKING, "input": history, "tools": [WEATHER], "store": False})
    assert ok["status"] == "completed"
    tampered = {**thought, "signature": thought["signature"][:-8] + "AAAAAAA="}
    error = create(gem, {"model": THINKING, "input": [history[0], tampered, call, result], "store": False}, 400)
    assert error["error"] == {"code": "invalid_request", "message": "Corrupted thought signature."}
    error = create(gem, {"model": THINKING, "input": [history[0], call, result], "store": False}, 400)
    assert "missing its thought signature" in error["error"]["message"]
    # Chained, the server holds the thought: only the result is sent.
    chained = create(gem, {"model": THINKING, "input": [result], "previous_interaction_id": first["id"]})
    assert geppetto_sim.context_items(chained["id"]) == history


def test_structured_output_follows_the_response_format_schema(gem: httpx.Client) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}}}
    fmt = {"type": "text", "mime_type": "application/json", "schema": schema}
    body = create(gem, {"model": MODEL, "input": "Paris weather as JSON", "response_format": fmt})
    data = json.loads(body["steps"][-1]["content"][0]["text"])
    assert set(data) == {"city", "temp"} and isinstance(data["temp"], int)
    assert body["response_format"] == fmt


def test_scripted_replies_are_served(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, call_id="c1")]), Reply(text="Done"))
    first = create(gem, {"model": MODEL, "input": "go", "tools": [WEATHER]})
    assert first["steps"] == [
        {"type": "function_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}}
    ]
    result = {"type": "function_result", "call_id": "c1", "result": [{"type": "text", "text": "snow"}]}
    second = create(gem, {"model": MODEL, "input": [result], "previous_interaction_id": first["id"]})
    assert second["steps"] == [{"type": "model_output", "content": [{"type": "text", "text": "Done"}]}]


@pytest.mark.parametrize(
    ("body", "code", "needle"),
    [
        ({"model": MODEL, "input": "x", "temperature": 1}, "parameter_unknown", "'temperature'"),
        ({"input": "x"}, "invalid_request", "'model' is required"),
        ({"model": MODEL}, "invalid_request", "'input' is required"),
        ({"model": MODEL, "input": [{"type": "bogus"}]}, "invalid_request", "unknown type 'bogus'"),
        ({"model": MODEL, "input": "x", "background": True, "store": False}, "invalid_request", "store"),
        ({"model": MODEL, "input": "x", "store": "yes"}, "invalid_request", "'store'"),
    ],
)
def test_bad_requests_get_the_services_400(gem: httpx.Client, body: dict[str, Any], code: str, needle: str) -> None:
    response = gem.post("/v1beta/interactions", json=body)
    assert response.status_code == 400, response.text
    validate_error(response.json())
    assert response.json()["error"]["code"] == code
    assert needle in response.json()["error"]["message"]


def test_missing_key_and_bad_json_use_the_interactions_envelope(geppetto_sim: Simulator) -> None:
    with httpx.Client(base_url=geppetto_sim.url, timeout=10) as client:
        response = client.post("/v1beta/interactions", json={"model": MODEL, "input": "x"})
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "permission_denied"
        validate_error(response.json())
        response = client.post("/v1beta/interactions", content=b"{nope", headers={"x-goog-api-key": "k"})
        assert response.status_code == 400 and validate_error(response.json())


def test_the_strict_validator_refuses_what_the_types_do_not_name() -> None:
    with pytest.raises(StrictTypeError, match="unknown field"):
        validate_request({"model": MODEL, "input": "x", "temperature": 1})
    with pytest.raises(StrictTypeError, match="union"):
        validate_request({"model": MODEL, "input": [{"type": "bogus"}]})
    with pytest.raises(StrictTypeError, match="enum"):
        validate_request({"model": MODEL, "input": "x", "generation_config": {"thinking_level": "ultra"}})
    with pytest.raises(StrictTypeError, match="unknown field"):
        validate_interaction({"id": "v1_x", "status": "completed", "object": "interaction"})


def test_the_older_structured_output_fields_are_read_too(gem: httpx.Client) -> None:
    """``response_mime_type`` (deprecated) with a raw JSON schema as ``response_format``."""
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    body = create(
        gem,
        {"model": MODEL, "input": "Reply in JSON", "response_format": schema, "response_mime_type": "application/json"},
    )
    assert set(json.loads(body["steps"][-1]["content"][0]["text"])) == {"answer"}


def test_contents_as_input_make_one_user_step(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    contents = [{"type": "text", "text": "Describe"}, {"type": "image", "data": "aGk=", "mime_type": "image/png"}]
    body = create(gem, {"model": MODEL, "input": contents})
    assert geppetto_sim.context_items(body["id"]) == [{"type": "user_input", "content": contents}]
    assert body["steps"][0]["content"][0]["text"] == "You said: Describe Attached: image (image/png, 2 bytes)."


def test_system_instruction_and_tools_are_not_inherited(gem: httpx.Client) -> None:
    """Only the history carries over to a chained interaction; tools and instructions are per request."""
    first = create(gem, {"model": MODEL, "input": "hi", "tools": [WEATHER], "system_instruction": "Be terse."})
    second = create(gem, {"model": MODEL, "input": "Weather in Paris?", "previous_interaction_id": first["id"]})
    assert second["steps"][0]["type"] == "model_output"  # no tool offered this time, so no call
    assert "tools" not in second and "system_instruction" not in second


def test_a_function_result_needs_its_call_in_the_context(gem: httpx.Client) -> None:
    orphan = {"type": "function_result", "call_id": "nope", "result": "x"}
    error = create(gem, {"model": MODEL, "input": [user("hi"), orphan], "store": False}, 400)
    assert "call_id 'nope'" in error["error"]["message"]
    first = create(gem, {"model": MODEL, "input": "hi"})
    create(gem, {"model": MODEL, "input": [orphan], "previous_interaction_id": first["id"]}, 400)


def test_store_false_may_still_continue_a_stored_interaction(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    first = create(gem, {"model": MODEL, "input": "kept"})
    second = create(gem, {"model": MODEL, "input": "not kept", "previous_interaction_id": first["id"], "store": False})
    assert geppetto_sim.context_items(second["id"]) == [user("kept"), *first["steps"], user("not kept")]
    get(gem, second["id"], status=404)
    assert geppetto_sim.held_steps(first["id"]) == [user("kept"), *first["steps"]]  # the first is unchanged
