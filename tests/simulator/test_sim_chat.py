"""OpenAI Chat Completions through plain HTTP: replies, tool calls, streaming with usage and [DONE], pairing errors."""

from __future__ import annotations

from typing import Any

import httpx
from simhelp import sse_events

from geppetto.simulator import Reply, Simulator, ToolCall

CHAT_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def test_chat_tool_call_then_answer(oai: httpx.Client) -> None:
    messages = [{"role": "user", "content": "Weather in Rome please"}]
    first = oai.post("/chat/completions", json={"model": "sim-1", "messages": messages, "tools": [CHAT_TOOL]}).json()
    choice = first["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    [call] = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city":"Rome"}'}
    messages += [choice["message"], {"role": "tool", "tool_call_id": call["id"], "content": "21C"}]
    second = oai.post("/chat/completions", json={"model": "sim-1", "messages": messages, "tools": [CHAT_TOOL]}).json()
    assert second["object"] == "chat.completion"
    assert isinstance(second["system_fingerprint"], str) and second["system_fingerprint"]  # a string, per the spec
    assert second["choices"][0]["message"]["content"] == "Here is what the tools returned. get_weather: 21C."
    assert second["choices"][0]["finish_reason"] == "stop"


def test_chat_missing_tool_message_is_rejected(oai: httpx.Client) -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_A", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "user", "content": "well?"},
    ]
    r = oai.post("/chat/completions", json={"model": "sim-1", "messages": messages})
    assert r.status_code == 400
    assert r.json() == {
        "error": {
            "message": "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            "'tool_call_id'. The following tool_call_ids did not have response messages: call_A",
            "type": "invalid_request_error",
            "param": "messages.[2].role",
            "code": None,
        }
    }


def test_chat_orphan_tool_message_is_rejected(oai: httpx.Client) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_X", "content": "1"}]
    r = oai.post("/chat/completions", json={"model": "sim-1", "messages": messages})
    assert (r.status_code, r.json()["error"]["param"]) == (400, "messages.[1].role")
    assert r.json()["error"]["message"] == (
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
    )


def test_chat_stream_with_usage_ends_with_done(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="Hi you", tool_calls=[ToolCall("f", {"a": 1}, call_id="call_1")]))
    body = {
        "model": "sim-1",
        "messages": [{"role": "user", "content": "x"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with oai.stream("POST", "/chat/completions", json=body) as r:
        events = sse_events(r.read().decode())
    assert events[-1] == (None, "[DONE]")
    chunks = [data for _, data in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    deltas = [c["choices"][0]["delta"] for c in chunks[:-1]]
    assert deltas == [
        {"role": "assistant", "content": "", "refusal": None},
        {"content": "Hi "},
        {"content": "you"},
        {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"a":1}'}}]},
        {},
    ]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


def _stream_deltas(oai: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    with oai.stream("POST", "/chat/completions", json={**body, "stream": True}) as r:
        events = sse_events(r.read().decode())
    assert events[-1] == (None, "[DONE]")
    return [data["choices"][0]["delta"] for _, data in events[:-1]]


def test_chat_streams_reasoning_content_the_deepseek_way(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(reasoning="Use the tool.", tool_calls=[ToolCall("f", {}, call_id="call_1")]))
    deltas = _stream_deltas(oai, {"model": "sim-1", "messages": [{"role": "user", "content": "x"}]})
    assert deltas == [
        {"role": "assistant", "content": None, "reasoning_content": ""},
        {"content": None, "reasoning_content": "Use "},
        {"content": None, "reasoning_content": "the "},
        {"content": None, "reasoning_content": "tool."},
        {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]},
        {},
    ]
    geppetto_sim.queue(Reply(text="Done.", reasoning="Easy."))
    r = oai.post("/chat/completions", json={"model": "sim-1", "messages": [{"role": "user", "content": "x"}]})
    message = r.json()["choices"][0]["message"]
    assert (message["content"], message["reasoning_content"]) == ("Done.", "Easy.")
    assert r.json()["usage"]["completion_tokens_details"]["reasoning_tokens"] == 2


def test_chat_openai_models_keep_reasoning_hidden(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="Done.", reasoning="Hidden thoughts."))
    r = oai.post("/chat/completions", json={"model": "o3", "messages": [{"role": "user", "content": "x"}]})
    message = r.json()["choices"][0]["message"]
    assert "reasoning_content" not in message and message["content"] == "Done."
    assert r.json()["usage"]["completion_tokens_details"]["reasoning_tokens"] == 3
    deltas = _stream_deltas(oai, {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]})
    assert not any("reasoning_content" in d for d in deltas)


def test_chat_thinking_mode_reasons_on_every_reply(oai: httpx.Client) -> None:
    user = [{"role": "user", "content": "hi"}]
    for body in ({"model": "deepseek-reasoner"}, {"model": "deepseek-chat", "thinking": {"type": "enabled"}}):
        message = oai.post("/chat/completions", json={**body, "messages": user}).json()["choices"][0]["message"]
        assert message["reasoning_content"] == "Thinking about the request."
    off = {"model": "deepseek-reasoner", "thinking": {"type": "disabled"}, "messages": user}
    assert "reasoning_content" not in oai.post("/chat/completions", json=off).json()["choices"][0]["message"]


def test_chat_thinking_mode_wants_reasoning_back_in_exchanges_with_tool_calls(oai: httpx.Client) -> None:
    call = {"id": "call_A", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello."},  # an exchange without tool calls needs nothing back
        {"role": "user", "content": "call f"},
        {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_content": "Call f."},
        {"role": "tool", "tool_call_id": "call_A", "content": "1"},
        {"role": "assistant", "content": "f gave 1."},
        {"role": "user", "content": "thanks"},
    ]
    r = oai.post("/chat/completions", json={"model": "deepseek-reasoner", "messages": messages})
    assert r.status_code == 400
    assert r.json() == {
        "error": {
            "message": "Missing `reasoning_content` field in the assistant message at message index 6. For more "
            "information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_request_error",
        }
    }
    messages[6]["reasoning_content"] = ""
    assert oai.post("/chat/completions", json={"model": "deepseek-reasoner", "messages": messages}).status_code == 200
    del messages[4]["reasoning_content"]
    r = oai.post("/chat/completions", json={"model": "deepseek-reasoner", "messages": messages})
    assert "message index 4" in r.json()["error"]["message"]
    assert oai.post("/chat/completions", json={"model": "sim-1", "messages": messages}).status_code == 200


def test_a_reasoning_only_reply_on_every_generation_api(geppetto_sim: Simulator) -> None:
    """A queued reply with nothing but reasoning: each API's reasoning form alone, a normal stop, no error."""
    with httpx.Client(base_url=geppetto_sim.url, timeout=10) as client:
        user = [{"role": "user", "content": "x"}]
        geppetto_sim.queue(*[Reply(reasoning="Only thinking.")] * 3)
        chat = client.post(
            "/v1/chat/completions", json={"model": "sim-1", "messages": user}, headers={"authorization": "Bearer k"}
        ).json()["choices"][0]
        assert (chat["message"]["content"], chat["message"]["reasoning_content"], chat["finish_reason"]) == (
            None,
            "Only thinking.",
            "stop",
        )
        claude = client.post(
            "/v1/messages",
            json={"model": "claude-sim", "max_tokens": 2048, "messages": user},
            headers={"x-api-key": "k"},
        ).json()
        [thinking] = claude["content"]
        assert (thinking["type"], thinking["thinking"], claude["stop_reason"]) == (
            "thinking",
            "Only thinking.",
            "end_turn",
        )
        gemini = client.post(
            "/v1beta/models/gemini-2.0-flash:generateContent",
            json={"contents": [{"role": "user", "parts": [{"text": "x"}]}]},
            headers={"x-goog-api-key": "k"},
        ).json()
        assert gemini["candidates"][0]["content"]["parts"] == [{"text": "Only thinking.", "thought": True}]
        assert gemini["usageMetadata"]["thoughtsTokenCount"] == 3
