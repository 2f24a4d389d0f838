"""The official openai and anthropic SDKs work against the simulator unchanged (base URL only)."""

from __future__ import annotations

from typing import Any

import anthropic
import openai

from geppetto.simulator import Simulator

TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": False,
}


def test_openai_sdk_stream_helper_chat_and_retry(geppetto_sim: Simulator) -> None:
    client = openai.OpenAI(api_key="sk-test", base_url=geppetto_sim.openai_url, max_retries=0)
    with client.responses.stream(model="gpt-4.1", input="Weather in Paris", tools=[TOOL]) as stream:
        final = stream.get_final_response()
    [call] = final.output
    assert (call.type, call.name, call.arguments) == ("function_call", "get_weather", '{"city":"Paris"}')
    chunks = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "You said: hi"
    geppetto_sim.fail_next(429, retry_after=0.01)
    retrying = openai.OpenAI(api_key="sk-test", base_url=geppetto_sim.openai_url, max_retries=1)
    assert retrying.responses.create(model="m", input="again").output_text == "You said: again"
    assert [r.path for r in geppetto_sim.requests[-2:]] == ["/v1/responses", "/v1/responses"]


def test_anthropic_sdk_stream_with_thinking(geppetto_sim: Simulator) -> None:
    client = anthropic.Anthropic(api_key="k", base_url=geppetto_sim.url, max_retries=0)
    with client.messages.stream(
        model="claude-sim",
        max_tokens=2048,
        messages=[{"role": "user", "content": "hi"}],
        thinking={"type": "enabled", "budget_tokens": 1024},
    ) as stream:
        message = stream.get_final_message()
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[1].text == "You said: hi"  # type: ignore[union-attr]


def test_sdks_read_built_in_tool_answers(geppetto_sim: Simulator) -> None:
    """The SDKs' stream helpers accumulate the built-in tools' events into their typed items and blocks."""
    client = openai.OpenAI(api_key="sk-test", base_url=geppetto_sim.openai_url, max_retries=0)
    tools: list[Any] = [{"type": "web_search"}, {"type": "code_interpreter", "container": {"type": "auto"}}]
    for text, kind, cls in [
        ("Search for Mars news", "web_search_call", "ResponseFunctionWebSearch"),
        ("Calculate 6 * 7", "code_interpreter_call", "ResponseCodeInterpreterToolCall"),
    ]:
        with client.responses.stream(model="gpt-4.1", input=text, tools=tools) as stream:
            final = stream.get_final_response()
        call, message = final.output
        assert (call.type, type(call).__name__) == (kind, cls)
        assert message.type == "message" and final.output_text
    ant = anthropic.Anthropic(api_key="k", base_url=geppetto_sim.url, max_retries=0)
    with ant.messages.stream(
        model="claude-sim",
        max_tokens=512,
        messages=[{"role": "user", "content": "Search for Mars news"}],
        tools=[{"type": "web_search_20250305", "name": "web_search"}],
    ) as claude:
        answer = claude.get_final_message()
    assert [type(b).__name__ for b in answer.content][:2] == ["ServerToolUseBlock", "WebSearchToolResultBlock"]
    assert answer.content[2].type == "text"
    assert answer.content[2].citations  # type: ignore[union-attr]
    assert answer.usage.server_tool_use is not None and answer.usage.server_tool_use.web_search_requests == 1
