"""Gemini generateContent / streamGenerateContent through plain HTTP, including thought signatures."""

from __future__ import annotations

from collections.abc import Iterator
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


@pytest.fixture
def gem(geppetto_sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=geppetto_sim.url, headers={"x-goog-api-key": "k"}, timeout=10) as client:
        yield client


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
