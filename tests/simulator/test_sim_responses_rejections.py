"""OpenAI Responses and Conversations rejections over HTTP: status and exact body for each (provider-apis.md §2.4)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from geppetto.simulator import Reply, Simulator


def _error(message: str, param: str | None = "input", code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def _answer(r: httpx.Response) -> tuple[int, Any]:
    return r.status_code, r.json()


def _post(client: httpx.Client, **body: Any) -> httpx.Response:
    return client.post("/responses", json={"model": "sim-1", **body})


@pytest.mark.parametrize("bad", ["@results.ress", "resp 1", "resp/1", "resp_é"])
def test_malformed_previous_response_id(oai: httpx.Client, geppetto_sim: Simulator, bad: str) -> None:
    assert _answer(_post(oai, input="x", previous_response_id=bad)) == (
        400,
        _error(
            f"Invalid 'previous_response_id': '{bad}'. Expected an ID that contains letters, numbers, underscores, or "
            "dashes, but this value contained additional characters.",
            "previous_response_id",
            "invalid_value",
        ),
    )
    geppetto_sim.compat_mode = True  # compatible servers ignore the field entirely
    assert _post(oai, input="x", previous_response_id=bad).status_code == 200


def test_duplicate_id_twice_within_one_input(oai: httpx.Client) -> None:
    item = {"type": "message", "id": "msg_dup", "role": "user", "content": "a"}
    assert _answer(_post(oai, input=[item, {**item, "content": "b"}])) == (
        400,
        _error("Duplicate item found with id msg_dup. Remove duplicate items from your input and try again."),
    )


def test_message_replayed_without_its_reasoning(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="Hi", reasoning="Think first"))
    user = {"role": "user", "content": "hello"}
    reasoning, message = _post(oai, model="o3", input=[user], store=False).json()["output"]
    again = {"role": "user", "content": "again"}
    assert _post(oai, model="o3", input=[user, reasoning, message, again], store=False).status_code == 200
    assert _answer(_post(oai, model="o3", input=[user, message, again], store=False)) == (
        400,
        _error(
            f"Item '{message['id']}' of type 'message' was provided without its required 'reasoning' item: "
            f"'{reasoning['id']}'."
        ),
    )


def test_item_reference_to_an_unknown_id(oai: httpx.Client) -> None:
    assert _answer(_post(oai, input=[{"type": "item_reference", "id": "msg_gone"}])) == (
        404,
        _error(
            "Item with id 'msg_gone' not found. Items are not persisted when `store` is set to false. Try again with "
            "`store` set to true, or remove this item from your input."
        ),
    )


def test_lone_queued_reasoning_comes_with_an_empty_message(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(reasoning="Only thinking"))
    first = _post(oai, input="hi").json()
    reasoning, message = first["output"]
    assert reasoning["summary"] == [{"type": "summary_text", "text": "Only thinking"}]
    assert message == {
        "id": message["id"],
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "", "annotations": [], "logprobs": []}],
    }
    assert _post(oai, input="next", previous_response_id=first["id"]).status_code == 200
    replay = [{"role": "user", "content": "hi"}, reasoning, message, {"role": "user", "content": "next"}]
    assert _post(oai, input=replay, store=False).status_code == 200


def test_deleting_a_middle_response_silently_drops_history_from_there_back(
    oai: httpx.Client, geppetto_sim: Simulator
) -> None:
    a = _post(oai, input="one").json()
    b = _post(oai, input="two", previous_response_id=a["id"]).json()
    c = _post(oai, input="three", previous_response_id=b["id"]).json()
    assert oai.delete(f"/responses/{b['id']}").status_code == 200
    d = _post(oai, input="four", previous_response_id=c["id"])
    assert d.status_code == 200
    texts = [i["content"][0]["text"] for i in geppetto_sim.context_items(d.json()["id"])]
    assert texts == ["three", "You said: three", "four"]
    assert _post(oai, input="x", previous_response_id=b["id"]).json()["error"]["code"] == "previous_response_not_found"


def test_openai_401_text(geppetto_sim: Simulator) -> None:
    r = httpx.post(geppetto_sim.openai_url + "/responses", json={"model": "m", "input": "x"})
    assert _answer(r) == (
        401,
        _error(
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer "
            "auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (i.e. username: YOUR_KEY) in your "
            "HTTP basic auth.",
            None,
        ),
    )


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            {"order": "sideways"},
            _error("Invalid value: 'sideways'. Supported values are: 'asc' and 'desc'.", "order", "invalid_value"),
        ),
        (
            {"limit": "0"},
            _error(
                "Invalid 'limit': integer below minimum value. Expected a value >= 1, but got 0 instead.",
                "limit",
                "integer_below_min_value",
            ),
        ),
        (
            {"limit": "101"},
            _error(
                "Invalid 'limit': integer above maximum value. Expected a value <= 100, but got 101 instead.",
                "limit",
                "integer_above_max_value",
            ),
        ),
        (
            {"limit": "ten"},
            _error("Invalid type for 'limit': expected an integer, but got a string instead.", "limit", "invalid_type"),
        ),
    ],
)
def test_pagination_errors(oai: httpx.Client, params: dict[str, str], expected: dict[str, Any]) -> None:
    response_id = _post(oai, input="x").json()["id"]
    conv = oai.post("/conversations", json={}).json()
    for path in (f"/responses/{response_id}/input_items", f"/conversations/{conv['id']}/items"):
        assert _answer(oai.get(path, params=params)) == (400, expected)


def test_conversation_items_duplicate_and_too_many(oai: httpx.Client) -> None:
    conv = oai.post("/conversations", json={}).json()
    item = {"type": "message", "id": "msg_once", "role": "user", "content": "hi"}
    assert oai.post(f"/conversations/{conv['id']}/items", json={"items": [item]}).status_code == 200
    assert _answer(oai.post(f"/conversations/{conv['id']}/items", json={"items": [item]})) == (
        400,
        _error("Duplicate item found with id msg_once. Remove duplicate items from your input and try again.", "items"),
    )
    too_many = [{"role": "user", "content": str(i)} for i in range(21)]
    assert _answer(oai.post(f"/conversations/{conv['id']}/items", json={"items": too_many})) == (
        400,
        _error(
            "Invalid 'items': array too long. Expected an array with maximum length 20, but got an array with length "
            "21 instead.",
            "items",
            "array_above_max_length",
        ),
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"tool_choice": "sometimes"},
            _error(
                "Invalid value: 'sometimes'. Supported values are: 'none', 'auto', and 'required'.",
                "tool_choice",
                "invalid_value",
            ),
        ),
        (
            # A decimal field says "decimal" even for a whole number (recorded: `temperature: -1` gets
            # "decimal below minimum value ... but got -1 instead.", code decimal_below_min_value).
            {"temperature": 3},
            _error(
                "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead.",
                "temperature",
                "decimal_above_max_value",
            ),
        ),
        (
            {"temperature": 2.5},
            _error(
                "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 2.5 instead.",
                "temperature",
                "decimal_above_max_value",
            ),
        ),
        (
            {"max_output_tokens": 1},
            _error(
                "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got 1 instead.",
                "max_output_tokens",
                "integer_below_min_value",
            ),
        ),
        (
            {"input": [{"role": "bot", "content": "x"}]},
            _error(
                "Invalid value: 'bot'. Supported values are: 'user', 'assistant', 'system', and 'developer'.",
                "input[0].role",
                "invalid_value",
            ),
        ),
        (
            {"input": [{"type": "message", "role": "user", "content": [{"type": "output_txt", "text": "x"}]}]},
            _error(
                "Invalid value: 'output_txt'. Supported values are: 'input_text', 'input_image', and 'input_file'.",
                "input[0].content[0].type",
                "invalid_value",
            ),
        ),
        (
            {"safety_identifier": "u" * 65},
            _error(
                "Invalid 'safety_identifier': string too long. Expected a string with maximum length 64, but got a "
                "string with length 65 instead.",
                "safety_identifier",
                "string_above_max_length",
            ),
        ),
    ],
)
def test_schema_errors_use_the_services_wording(
    oai: httpx.Client, change: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert _answer(_post(oai, **{"input": "x", **change})) == (400, expected)


def test_chat_schema_errors_pick_the_message_kind_by_role(oai: httpx.Client) -> None:
    r = oai.post("/chat/completions", json={"model": "m", "messages": [{"role": "bot", "content": "x"}]})
    assert _answer(r) == (
        400,
        _error(
            "Invalid value: 'bot'. Supported values are: 'developer', 'system', 'user', 'assistant', 'tool', and "
            "'function'.",
            "messages[0].role",
            "invalid_value",
        ),
    )
    r = oai.post("/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": 5}]})
    assert _answer(r) == (
        400,
        _error(
            "Invalid type for 'messages[0].content': expected a string or an array, but got an integer instead.",
            "messages[0].content",
            "invalid_type",
        ),
    )
