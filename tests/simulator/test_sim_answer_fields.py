"""The fields the services send on every answer, as the simulator sends them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from simhelp import sse_events

from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.simulator._tokens import count_text

HEADERS = {"authorization": "Bearer sk-sim", "x-api-key": "sk-sim", "x-goog-api-key": "sim", "anthropic-version": "1"}


@pytest.fixture
def client(geppetto_sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=geppetto_sim.url, headers=HEADERS, timeout=10) as c:
        yield c


def test_responses_echo_sampling_and_identity_settings(client: httpx.Client) -> None:
    settings = {
        "presence_penalty": 0.5,
        "frequency_penalty": -0.25,
        "top_logprobs": 3,
        "max_tool_calls": 2,
        "safety_identifier": "user-7",
        "prompt_cache_key": "tenant-1",
        "prompt_cache_retention": "24h",
    }
    echoed = client.post("/v1/responses", json={"model": "gpt-4.1", "input": "hi", **settings}).json()
    assert {k: echoed[k] for k in settings} == settings
    plain = client.post("/v1/responses", json={"model": "gpt-4.1", "input": "hi"}).json()
    defaults = {k: plain[k] for k in settings}
    assert defaults == {
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "top_logprobs": 0,
        "max_tool_calls": None,
        "safety_identifier": None,
        "prompt_cache_key": None,
        "prompt_cache_retention": None,
    }
    assert plain["billing"] == {"payer": "developer"}
    assert plain["usage"]["input_tokens_details"] == {"cached_tokens": 0, "cache_write_tokens": 0}


def test_responses_content_parts_carry_logprobs_in_streams(client: httpx.Client) -> None:
    r = client.post("/v1/responses", json={"model": "gpt-4.1", "input": "hi", "stream": True})
    events = {data["type"]: data for _, data in sse_events(r.text) if isinstance(data, dict)}
    assert events["response.content_part.added"]["part"] == {
        "type": "output_text",
        "text": "",
        "annotations": [],
        "logprobs": [],
    }
    assert events["response.content_part.done"]["part"]["logprobs"] == []
    assert events["response.output_text.delta"]["logprobs"] == []


def test_claude_stop_details_and_usage_details(client: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="Done.", reasoning="Short thought."))
    body = {"model": "claude-sim", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    message = client.post("/v1/messages", json=body).json()
    assert message["stop_details"] is None
    usage = message["usage"]
    assert usage["cache_creation"] == {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0}
    assert usage["output_tokens_details"] == {"thinking_tokens": count_text("Short thought.")}
    assert usage["inference_geo"] == "global"
    assert "server_tool_use" not in usage  # only when a server tool ran
    stream = client.post("/v1/messages", json={**body, "stream": True})
    delta = next(d for _, d in sse_events(stream.text) if isinstance(d, dict) and d["type"] == "message_delta")
    assert set(delta["usage"]) == {
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "output_tokens",
    }


@pytest.mark.parametrize(("model", "has_id"), [("gemini-3-flash-preview", True), ("gemini-2.5-flash", False)])
def test_gemini_3_ids_its_function_calls(
    client: httpx.Client, geppetto_sim: Simulator, model: str, has_id: bool
) -> None:
    geppetto_sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"})]))
    body = {"contents": [{"role": "user", "parts": [{"text": "Weather?"}]}]}
    answer = client.post(f"/v1beta/models/{model}:generateContent", json=body).json()
    call = answer["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert ("id" in call) is has_id
    if has_id:
        assert len(call["id"]) == 8 and call["id"].isalnum()
    usage = answer["usageMetadata"]
    assert usage["promptTokensDetails"] == [{"modality": "TEXT", "tokenCount": usage["promptTokenCount"]}]
    assert usage["thoughtsTokenCount"] > 0  # both models think by default


def test_chat_fingerprint_is_a_string(client: httpx.Client) -> None:
    body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}
    answer = client.post("/v1/chat/completions", json=body).json()
    assert isinstance(answer["system_fingerprint"], str) and answer["system_fingerprint"].startswith("fp_")
    assert answer["service_tier"] == "default"


def test_responses_logprobs_when_included(client: httpx.Client) -> None:
    body = {"model": "gpt-4.1", "input": "hi", "include": ["message.output_text.logprobs"], "top_logprobs": 2}
    part = client.post("/v1/responses", json=body).json()["output"][0]["content"][0]
    assert part["text"] == "You said: hi"
    assert [p["token"] for p in part["logprobs"]] == ["You ", "said: ", "hi"]
    first = part["logprobs"][0]
    assert (first["bytes"], first["logprob"]) == (list(b"You "), 0.0)
    assert [t["token"] for t in first["top_logprobs"]] == ["You ", "You~1"]
    stream = client.post("/v1/responses", json={**body, "stream": True})
    deltas = [
        d for _, d in sse_events(stream.text) if isinstance(d, dict) and d["type"] == "response.output_text.delta"
    ]
    assert [d["logprobs"] for d in deltas] == [[p] for p in part["logprobs"]]
    plain = client.post("/v1/responses", json={"model": "gpt-4.1", "input": "hi"}).json()
    assert plain["output"][0]["content"][0]["logprobs"] == []


def test_responses_text_deltas_are_padded_unless_turned_off(client: httpx.Client) -> None:
    body = {"model": "gpt-4.1", "input": "hello there", "stream": True}

    def deltas(extra: dict[str, Any]) -> list[dict[str, Any]]:
        text = client.post("/v1/responses", json={**body, **extra}).text
        return [d for _, d in sse_events(text) if isinstance(d, dict) and d["type"] == "response.output_text.delta"]

    padded, plain = deltas({}), deltas({"stream_options": {"include_obfuscation": False}})
    assert len(padded) == len(plain) == 4  # "You said: hello there"
    assert all(isinstance(d["obfuscation"], str) and d["obfuscation"] for d in padded)
    assert all("obfuscation" not in d for d in plain)
