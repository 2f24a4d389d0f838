"""Gemini generateContent / streamGenerateContent through plain HTTP, including thought signatures."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from simhelp import sse_events

from geppetto.simulator import Simulator

TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}},
            }
        ]
    }
]
USER = {"role": "user", "parts": [{"text": "What is the weather in Lima?"}]}


def _gen(client: httpx.Client, model: str, contents: list[Any]) -> httpx.Response:
    return client.post(f"/v1beta/models/{model}:generateContent", json={"contents": contents, "tools": TOOLS})


def test_function_call_and_answer(gem: httpx.Client) -> None:
    first = _gen(gem, "gemini-2.0-flash", [USER]).json()
    assert first["candidates"][0]["content"] == {
        "role": "model",
        "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Lima"}}}],
    }
    model_turn = first["candidates"][0]["content"]
    answer = {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "20C"}}}]}
    second = _gen(gem, "gemini-2.0-flash", [USER, model_turn, answer]).json()
    assert second["candidates"][0]["content"]["parts"] == [
        {"text": "Here is what the tools returned. get_weather: 20C."}
    ]
    assert second["candidates"][0]["finishReason"] == "STOP"
    assert second["usageMetadata"]["promptTokenCount"] > first["usageMetadata"]["promptTokenCount"]


def test_thought_signature_required_for_thinking_models(gem: httpx.Client) -> None:
    first = _gen(gem, "gemini-3-pro", [USER]).json()
    [part] = first["candidates"][0]["content"]["parts"]
    assert part["thoughtSignature"]
    answer = {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "20C"}}}]}
    ok = _gen(gem, "gemini-3-pro", [USER, {"role": "model", "parts": [part]}, answer])
    assert ok.status_code == 200
    stripped = {"functionCall": part["functionCall"]}
    r = _gen(gem, "gemini-3-pro", [USER, {"role": "model", "parts": [stripped]}, answer])
    assert r.status_code == 400
    assert r.json() == {
        "error": {
            "code": 400,
            "message": "Function call is missing a thought_signature in functionCall parts. This is required for tools to "
            "work correctly, and missing thought_signature may lead to degraded model performance. Additional data, "
            "function call `default_api:get_weather` , position 1. Please refer to "
            "https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
            "status": "INVALID_ARGUMENT",
        }
    }


def test_stream_sse_chunks(gem: httpx.Client) -> None:
    url = "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
    with gem.stream("POST", url, json={"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}) as r:
        events = sse_events(r.read().decode())
    texts = [d["candidates"][0]["content"]["parts"][0]["text"] for _, d in events]
    assert "".join(texts) == "You said: hello"
    assert all(name is None for name, _ in events)
    assert "finishReason" not in events[0][1]["candidates"][0]
    assert events[-1][1]["candidates"][0]["finishReason"] == "STOP"
    assert "usageMetadata" in events[-1][1]


def test_errors(gem: httpx.Client, geppetto_sim: Simulator) -> None:
    r = gem.post("/v1beta/models/gemini-2.0-flash:generateContent", json={})
    assert r.status_code == 400
    assert r.json() == {
        "error": {
            "code": 400,
            "message": "* GenerateContentRequest.contents: contents is not specified",
            "status": "INVALID_ARGUMENT",
        }
    }
    r = gem.post(
        "/v1beta/models/gemini-2.0-flash:generateContent",
        json={"contents": [{"role": "bot", "parts": [{"text": "x"}]}]},
    )
    assert (r.status_code, r.json()) == (
        400,
        {"error": {"code": 400, "message": "Please use a valid role: user, model.", "status": "INVALID_ARGUMENT"}},
    )
    r = gem.post(
        "/v1beta/models/gemini-2.0-flash:generateContent", json={"contents": [{"role": None, "parts": [{"text": "x"}]}]}
    )
    assert r.status_code == 200  # a null role is unset, which means user
    r = httpx.post(geppetto_sim.url + "/v1beta/models/g:generateContent", json={"contents": [USER]})
    assert (r.status_code, r.json()["error"]["status"]) == (403, "PERMISSION_DENIED")


def test_stream_without_sse_is_a_json_array(gem: httpx.Client) -> None:
    r = gem.post("/v1beta/models/gemini-2.0-flash:streamGenerateContent", json={"contents": [USER]})
    chunks = r.json()
    assert isinstance(chunks, list) and len(chunks) > 1
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert (
        "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks)
        == "You said: What is the weather in Lima?"
    )


ANSWER = {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "20C"}}}]}
CALL = {"functionCall": {"name": "get_weather", "args": {"city": "Lima"}}}
MISSING = "Function call is missing a thought_signature in functionCall parts."


def test_issued_signatures_are_standard_base64(gem: httpx.Client) -> None:
    [part] = _gen(gem, "gemini-3-pro", [USER]).json()["candidates"][0]["content"]["parts"]
    signature = part["thoughtSignature"]
    assert base64.b64encode(base64.b64decode(signature, validate=True)).decode() == signature


@pytest.mark.parametrize("placeholder", ["skip_thought_signature_validator", "context_engineering_is_the_way_to_go"])
def test_documented_placeholder_signatures_are_accepted(gem: httpx.Client, placeholder: str) -> None:
    step = {"role": "model", "parts": [{**CALL, "thoughtSignature": placeholder}]}
    r = _gen(gem, "gemini-3-pro", [USER, step, ANSWER])
    assert r.status_code == 200, r.text


def test_signatures_are_checked_only_in_the_current_turn(gem: httpx.Client) -> None:
    old_step = {"role": "model", "parts": [CALL, {"text": "x", "thoughtSignature": "AAAA"}]}
    earlier = [USER, old_step, ANSWER, {"role": "model", "parts": [{"text": "20C."}]}]
    follow_up = {"role": "user", "parts": [{"text": "And in Quito?"}]}
    r = _gen(gem, "gemini-3-pro", [*earlier, follow_up])
    assert r.status_code == 200, r.text  # an unsigned call and a foreign signature in an older turn pass
    r = _gen(gem, "gemini-3-pro", [*earlier, follow_up, {"role": "model", "parts": [CALL]}, ANSWER])
    assert r.status_code == 400 and MISSING in r.json()["error"]["message"]
    assert "position 5" in r.json()["error"]["message"]


def test_each_model_step_of_the_current_turn_needs_its_first_call_signed(gem: httpx.Client) -> None:
    [signed] = _gen(gem, "gemini-3-pro", [USER]).json()["candidates"][0]["content"]["parts"]
    first = {"role": "model", "parts": [signed, CALL]}  # only the first call of a step carries one
    assert _gen(gem, "gemini-3-pro", [USER, first, ANSWER]).status_code == 200
    second = {"role": "model", "parts": [CALL]}
    r = _gen(gem, "gemini-3-pro", [USER, first, ANSWER, second, ANSWER])
    assert r.status_code == 400 and "position 3" in r.json()["error"]["message"]
    assert _gen(gem, "gemini-2.0-flash", [USER, first, ANSWER, second, ANSWER]).status_code == 200  # not thinking


def test_corrupted_and_undecodable_signatures(gem: httpx.Client) -> None:
    forged = base64.b64encode(b"not the simulator's").decode()
    r = _gen(gem, "gemini-3-pro", [USER, {"role": "model", "parts": [{**CALL, "thoughtSignature": forged}]}, ANSWER])
    assert (r.status_code, r.json()["error"]["message"]) == (400, "Corrupted thought signature.")
    bad = {"role": "model", "parts": [{**CALL, "thoughtSignature": "not base64!"}]}
    r = _gen(gem, "gemini-2.0-flash", [USER, bad, ANSWER, {"role": "user", "parts": [{"text": "hi"}]}])
    assert r.status_code == 400
    assert r.json()["error"] == {
        "code": 400,
        "message": "Invalid value at 'contents[1].parts[0].thought_signature' (TYPE_BYTES), "
        'Base64 decoding failed for "not base64!"',
        "status": "INVALID_ARGUMENT",
    }
