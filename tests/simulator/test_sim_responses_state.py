"""OpenAI Responses server state: storage, chains, expiry, compat mode, reasoning replay and every rejection text."""

from __future__ import annotations

from typing import Any

import httpx
from simhelp import WEATHER_TOOL

from geppetto.simulator import Reply, Simulator, ToolCall


def _error(message: str, param: str | None = "input", code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def _not_found(response_id: str) -> dict[str, Any]:
    return _error(
        f"Previous response with id '{response_id}' not found.", "previous_response_id", "previous_response_not_found"
    )


def _rejected(r: httpx.Response, status: int = 400) -> Any:
    """The error body of `r`, after asserting its HTTP status."""
    assert r.status_code == status, r.text
    return r.json()


def _post(client: httpx.Client, **body: Any) -> httpx.Response:
    return client.post("/responses", json={"model": "sim-1", **body})


def test_unknown_unstored_forgotten_and_deleted_parents(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    assert _rejected(_post(oai, input="x", previous_response_id="resp_nope")) == _not_found("resp_nope")
    unstored = _post(oai, input="x", store=False).json()
    assert unstored["store"] is False
    assert oai.get(f"/responses/{unstored['id']}").status_code == 404
    assert _rejected(_post(oai, input="y", previous_response_id=unstored["id"])) == _not_found(unstored["id"])
    stored = _post(oai, input="x").json()
    assert oai.get(f"/responses/{stored['id']}").json() == stored
    geppetto_sim.forget(stored["id"])
    assert _rejected(_post(oai, input="y", previous_response_id=stored["id"])) == _not_found(stored["id"])
    other = _post(oai, input="x").json()
    assert oai.delete(f"/responses/{other['id']}").json() == {
        "id": other["id"],
        "object": "response.deleted",
        "deleted": True,
    }
    assert oai.delete(f"/responses/{other['id']}").status_code == 404


def test_instructions_are_not_inherited_and_input_items_listed(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    first = _post(oai, input="one", instructions="Speak like a pirate").json()
    second = _post(oai, input="two", previous_response_id=first["id"]).json()
    assert second["instructions"] is None
    assert [i["content"][0]["text"] for i in geppetto_sim.context_items(second["id"])] == [
        "one",
        "You said: one",
        "two",
    ]
    items = oai.get(f"/responses/{second['id']}/input_items").json()
    assert [i["content"][0]["text"] for i in items["data"]] == ["two"]
    assert items["has_more"] is False and items["first_id"] == items["last_id"] == items["data"][0]["id"]


def test_both_selectors_and_unknown_conversation(oai: httpx.Client) -> None:
    r = _post(oai, input="x", previous_response_id="resp_1", conversation="conv_1")
    assert _rejected(r) == _error(
        "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or 'conversation'.",
        None,
        "mutually_exclusive_parameters",
    )
    r = _post(oai, input="x", conversation={"id": "conv_missing"})
    assert (r.status_code, r.json()) == (404, _error("Conversation with id 'conv_missing' not found.", "conversation"))


def test_duplicate_orphan_and_unanswered(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, call_id="call_1")]))
    first = _post(oai, input="weather?", tools=[WEATHER_TOOL]).json()
    call = first["output"][0]
    answer = {"type": "function_call_output", "call_id": "call_1", "output": "5C"}
    r = _post(oai, previous_response_id=first["id"], input=[call, answer])
    assert _rejected(r) == _error(
        f"Duplicate item found with id {call['id']}. Remove duplicate items from your input and try again."
    )
    r = _post(oai, previous_response_id=first["id"], input=[answer, {**answer, "call_id": "call_zz"}])
    assert _rejected(r) == _error("No tool call found for function call output with call_id call_zz.")
    r = _post(oai, previous_response_id=first["id"], input="never mind")
    assert _rejected(r) == _error("No tool output found for function call call_1.")
    r = _post(oai, input=[{"type": "function_call_output", "call_id": "call_q", "output": "1"}])
    assert _rejected(r) == _error("No tool call found for function call output with call_id call_q.")


def test_stateless_reasoning_replay_rules(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, call_id="call_r")]))
    user = {"role": "user", "content": "weather?"}
    first = _post(oai, model="o3", input=[user], store=False, include=["reasoning.encrypted_content"]).json()
    reasoning, call = first["output"]
    assert reasoning["type"] == "reasoning" and reasoning["encrypted_content"].startswith("gAAAA")
    answer = {"type": "function_call_output", "call_id": "call_r", "output": "5C"}
    ok = _post(oai, model="o3", input=[user, reasoning, call, answer], store=False)
    assert ok.status_code == 200
    r = _post(oai, model="o3", input=[user, call, answer], store=False)
    assert _rejected(r) == _error(
        f"Item '{call['id']}' of type 'function_call' was provided without its required 'reasoning' item: '{reasoning['id']}'."
    )
    r = _post(oai, model="o3", input=[user, reasoning], store=False)
    assert _rejected(r) == _error(
        f"Item '{reasoning['id']}' of type 'reasoning' was provided without its required following item."
    )
    tampered = {**reasoning, "encrypted_content": reasoning["encrypted_content"][:-8] + "AAAAAAA="}
    r = _post(oai, model="o3", input=[user, tampered, call, answer], store=False)
    assert _rejected(r) == _error(
        f"The encrypted content for item {reasoning['id']} could not be verified.", code="invalid_encrypted_content"
    )
    bare = {k: v for k, v in reasoning.items() if k != "encrypted_content"}
    r = _post(oai, model="o3", input=[user, bare, call, answer], store=False)
    assert (r.status_code, r.json()) == (
        404,
        _error(
            f"Item with id '{reasoning['id']}' not found. Items are not persisted when `store` is set to false. Try again "
            "with `store` set to true, or remove this item from your input."
        ),
    )


def test_item_reference_resolves_stored_items(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    first = _post(oai, input="remember me").json()
    ref = {"type": "item_reference", "id": first["output"][0]["id"]}
    second = _post(oai, input=[ref, {"role": "user", "content": "and?"}]).json()
    assert geppetto_sim.context_items(second["id"])[0] == first["output"][0]
    assert _post(oai, input=[{"type": "item_reference", "id": "msg_gone"}]).status_code == 404


def test_compat_mode_ignores_chain_and_store(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    first = _post(oai, input="one").json()
    geppetto_sim.compat_mode = True
    second = _post(oai, input="two", previous_response_id=first["id"]).json()
    assert second["previous_response_id"] is None
    assert geppetto_sim.context_items(second["id"]) == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "two"}],
            "status": "completed",
            "id": geppetto_sim.context_items(second["id"])[0]["id"],
        }
    ]
    assert oai.get(f"/responses/{second['id']}").status_code == 404
    assert _post(oai, input="x", previous_response_id="resp_never").status_code == 200


def test_schema_validation_reports_json_path(oai: httpx.Client) -> None:
    r = _post(oai, input=[{"type": "function_call_output", "call_id": "c"}])
    assert _rejected(r) == _error(
        "Missing required parameter: 'input[0].output'.", "input[0].output", "missing_required_parameter"
    )
    r = _post(oai, input="x", temperature="hot")
    assert _rejected(r) == _error(
        "Invalid type for 'temperature': expected a decimal or null, but got a string instead.",
        "temperature",
        "invalid_type",
    )
    r = oai.post("/responses", json={"input": "x"})
    assert _rejected(r) == _error("Missing required parameter: 'model'.", "model", "missing_required_parameter")


def test_structured_output_and_incomplete(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    schema = {
        "type": "object",
        "properties": {"count": {"type": "integer"}},
        "required": ["count"],
        "additionalProperties": False,
    }
    r = _post(
        oai, input="I have 3 apples", text={"format": {"type": "json_schema", "name": "n", "schema": schema}}
    ).json()
    assert r["output"][0]["content"][0]["text"] == '{"count":3}'
    geppetto_sim.queue(Reply(text="cut", stop="max_tokens"))
    r = _post(oai, input="x").json()
    assert (r["status"], r["incomplete_details"]) == ("incomplete", {"reason": "max_output_tokens"})


def test_empty_input_continues_chain_unless_strict(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    first = _post(oai, input="one").json()
    second = _post(oai, input=[], previous_response_id=first["id"]).json()
    assert [i["type"] for i in geppetto_sim.context_items(second["id"])] == ["message", "message"]
    assert second["output"][0]["content"][0]["text"] == "You said: one"
    geppetto_sim.reject_empty_input = True
    r = _post(oai, input=[], previous_response_id=first["id"])
    assert _rejected(r) == _error("Invalid 'input': provide at least one input item.", "input", "empty_input")
