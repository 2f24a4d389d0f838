"""What the real services accept (shown by recorded real traffic) and the simulator once refused, and what
they refuse that it once accepted: each case both ways."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from geppetto.simulator import Reply, Simulator, ToolCall

HEADERS = {"authorization": "Bearer sk-sim", "x-api-key": "sk-sim", "x-goog-api-key": "sim", "anthropic-version": "1"}
FUNCTION = {"type": "function", "name": "get_capital", "parameters": {"type": "object", "properties": {}}}


@pytest.fixture
def client(geppetto_sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=geppetto_sim.url, headers=HEADERS, timeout=10) as c:
        yield c


def _responses(client: httpx.Client, items: list[Any], **extra: Any) -> httpx.Response:
    return client.post("/v1/responses", json={"model": "gpt-4.1", "input": items, **extra})


def test_assistant_output_text_without_id_status_or_logprobs(client: httpx.Client) -> None:
    said = {"role": "assistant", "content": [{"type": "output_text", "text": "Paris."}]}
    r = _responses(
        client, [{"role": "user", "content": "Capital of France?"}, said, {"role": "user", "content": "Sure?"}]
    )
    assert r.status_code == 200, r.text
    full = {**said, "type": "message", "content": [{"type": "output_text", "text": "Paris.", "annotations": []}]}
    assert _responses(client, [{"role": "user", "content": "Hi"}, full]).status_code == 200


def test_input_text_in_an_assistant_message_is_refused(client: httpx.Client) -> None:
    said = {"role": "assistant", "content": [{"type": "input_text", "text": "Paris."}]}
    r = _responses(client, [{"role": "user", "content": "Capital of France?"}, said])
    assert r.status_code == 400
    assert r.json()["error"] == {
        "message": "Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'.",
        "type": "invalid_request_error",
        "param": "input[1].content[0].type",
        "code": "invalid_value",
    }


def test_output_text_in_a_user_message_is_still_refused(client: httpx.Client) -> None:
    r = _responses(client, [{"role": "user", "content": [{"type": "output_text", "text": "x"}]}])
    assert r.status_code == 400
    assert "Supported values are: 'input_text'" in r.json()["error"]["message"]


def test_function_tool_without_strict_and_image_without_detail(client: httpx.Client) -> None:
    image = {"type": "input_image", "image_url": "https://example.com/cat.png"}
    r = _responses(
        client, [{"role": "user", "content": [{"type": "input_text", "text": "What is it?"}, image]}], tools=[FUNCTION]
    )
    assert r.status_code == 200, r.text
    assert r.json()["tools"][0]["name"] == "get_capital"


def test_function_call_with_null_status(client: httpx.Client) -> None:
    call = {"type": "function_call", "call_id": "call_1", "name": "get_capital", "arguments": "{}", "status": None}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "Paris"}
    r = _responses(client, [{"role": "user", "content": "Capital?"}, call, output], tools=[FUNCTION])
    assert r.status_code == 200, r.text
    bad = _responses(client, [{"role": "user", "content": "Capital?"}, {**call, "status": "done"}, output])
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "input[1].status"


def test_assistant_message_after_a_hosted_tool_item(client: httpx.Client) -> None:
    search = {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "q"},
    }
    said = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "phase": "final_answer",
            "content": [{"type": "output_text", "text": "Found it.", "annotations": []}]}  # fmt: skip
    r = _responses(client, [{"role": "user", "content": "Search"}, search, said, {"role": "user", "content": "More"}])
    assert r.status_code == 200, r.text


def _claude(client: httpx.Client, messages: list[Any], **extra: Any) -> httpx.Response:
    return client.post("/v1/messages", json={"model": "claude-sim", "max_tokens": 100, "messages": messages, **extra})


def test_claude_mid_conversation_system_message(client: httpx.Client) -> None:
    messages = [
        {"role": "user", "content": "Review add()."},
        {"role": "assistant", "content": "Looks fine."},
        {"role": "system", "content": [{"type": "text", "text": "From now on, annotate types."}]},
        {"role": "user", "content": "Now mul()."},
    ]
    assert _claude(client, messages).status_code == 200
    first = _claude(client, [{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}])
    assert first.status_code == 400
    assert first.json()["error"]["message"] == "messages.0.role: Input should be 'user' or 'assistant'"


def test_claude_tool_reference_results_and_tool_additions(client: httpx.Client, geppetto_sim: Simulator) -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "tool_search", "input": {"query": "refunds"}}
    found = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "tool_reference", "tool_name": "refund"}],
    }
    added = {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "refund"}}
    messages = [
        {"role": "user", "content": "Find the refund tool."},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [found]},
        {"role": "system", "content": [added]},
    ]
    assert _claude(client, messages).status_code == 200
    nameless = {**found, "content": [{"type": "tool_reference"}]}
    r = _claude(client, [*messages[:2], {"role": "user", "content": [nameless]}])
    assert r.status_code == 400
    assert (
        r.json()["error"]["message"]
        == "messages.2.content.0.tool_result.content.0.tool_reference.tool_name: Field required"
    )


def test_claude_server_tool_blocks_sent_back(client: httpx.Client) -> None:
    use = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "bash_code_execution", "input": {"command": "ls"}}
    ran = {"type": "bash_code_execution_tool_result", "tool_use_id": "srvtoolu_1",
           "content": {"type": "bash_code_execution_result", "stdout": "", "stderr": "", "return_code": 0, "content": []}}  # fmt: skip
    compaction = {"type": "compaction", "content": "Summary: the user said hello."}
    messages = [
        {"role": "user", "content": "List files"},
        {"role": "assistant", "content": [compaction, use, ran, {"type": "text", "text": "Nothing there."}]},
        {"role": "user", "content": "Thanks"},
    ]
    assert _claude(client, messages).status_code == 200
    orphan = {k: v for k, v in ran.items() if k != "tool_use_id"}
    r = _claude(client, [messages[0], {"role": "assistant", "content": [use, orphan]}, messages[2]])
    assert r.status_code == 400
    assert r.json()["error"]["message"].endswith("bash_code_execution_tool_result.tool_use_id: Field required")


def _gemini(client: httpx.Client, body: dict[str, Any], model: str = "gemini-2.5-flash") -> httpx.Response:
    return client.post(f"/v1beta/models/{model}:generateContent", json=body)


def test_gemini_snake_case_fields_are_read(client: httpx.Client, geppetto_sim: Simulator) -> None:
    tool = {"function_declarations": [{"name": "get_weather", "description": "Weather for a city",
            "parameters_json_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]}  # fmt: skip
    body = {
        "contents": [{"role": "user", "parts": [{"text": "Weather in Oslo?"}]}],
        "tools": [tool],
        "tool_config": {"function_calling_config": {"mode": "ANY"}},
        "generation_config": {"thinking_config": {"thinking_budget": 0}},
    }
    r = _gemini(client, body)
    assert r.status_code == 200, r.text
    call = r.json()["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert call == {"name": "get_weather", "args": {"city": "Oslo"}}
    assert "thoughtsTokenCount" not in r.json()["usageMetadata"]  # thinking_budget 0 was read


def test_gemini_whole_decimal_for_an_integer(client: httpx.Client) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": {"topK": 40.0}}
    assert _gemini(client, body).status_code == 200
    r = _gemini(client, {**body, "generationConfig": {"topK": 40.5}})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "Invalid value at 'generation_config.top_k' (TYPE_INT32), 40.5"


def test_gemini_server_tool_and_signature_only_parts(client: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="Paris.", reasoning="Thinking."))
    first = _gemini(client, {"contents": [{"role": "user", "parts": [{"text": "Capital?"}]}]}, "gemini-3-flash-preview")
    signature = first.json()["candidates"][0]["content"]["parts"][-1]["thoughtSignature"]
    model_turn = {
        "role": "model",
        "parts": [
            {"toolCall": {"id": "t1", "tool_type": "GOOGLE_SEARCH_WEB", "args": {"queries": ["capital"]}}},
            {"toolResponse": {"id": "t1", "tool_type": "GOOGLE_SEARCH_WEB", "response": {"result": []}}},
            {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
            {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1\n"}},
            {"text": "Paris."},
            {"thoughtSignature": signature},
        ],
    }
    body = {"contents": [{"role": "user", "parts": [{"text": "Capital?"}]}, model_turn,
                         {"role": "user", "parts": [{"text": "Sure?"}]}]}  # fmt: skip
    assert _gemini(client, body, "gemini-3-flash-preview").status_code == 200
    empty = {**model_turn, "parts": [{}]}
    r = _gemini(client, {"contents": [body["contents"][0], empty, body["contents"][2]]})
    assert r.status_code == 400
    assert "required oneof field 'data' must have one initialized field" in r.json()["error"]["message"]


def test_gemini_foreign_signature_is_refused_saying_so(client: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(tool_calls=[ToolCall("f", {})]))
    turn = {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "Zm9yZWlnbg=="}]}
    answer = {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"output": "ok"}}}]}
    body = {"contents": [{"role": "user", "parts": [{"text": "go"}]}, turn, answer]}
    r = _gemini(client, body, "gemini-3-flash-preview")
    assert (r.status_code, r.json()["error"]["message"]) == (400, "Corrupted thought signature.")


def test_claude_count_tokens(client: httpx.Client) -> None:
    messages = [{"role": "user", "content": "Count these words please"}]
    counted = client.post("/v1/messages/count_tokens", json={"model": "claude-sim", "messages": messages})
    assert counted.status_code == 200
    sent = _claude(client, messages).json()["usage"]["input_tokens"]
    assert counted.json() == {"input_tokens": sent}
    bad = client.post("/v1/messages/count_tokens", json={"model": "claude-sim", "messages": [{"role": "user"}]})
    assert (bad.status_code, bad.json()["error"]["message"]) == (400, "messages.0.content: Field required")


def test_gemini_part_holding_only_video_metadata(client: httpx.Client) -> None:
    video = {"fileData": {"fileUri": "https://www.youtube.com/watch?v=9hE5-98ZeCg", "mimeType": "video/mp4"}}
    clip = {"videoMetadata": {"startOffset": "10s", "endOffset": "20s"}}
    body = {"contents": [{"role": "user", "parts": [video, clip, {"text": "What happens here?"}]}]}
    r = _gemini(client, body)
    assert r.status_code == 200, r.text
    r = _gemini(client, {"contents": [{"role": "user", "parts": [video, {}, {"text": "What happens here?"}]}]})
    assert r.status_code == 400  # a part with nothing at all is still refused
    assert "required oneof field 'data' must have one initialized field" in r.json()["error"]["message"]


def test_image_generation_call_sent_back_without_status(client: httpx.Client) -> None:
    call = {"type": "image_generation_call", "id": "ig_0123", "result": "aGVsbG8="}
    items = [{"role": "user", "content": "Draw a cat"}, call, {"role": "user", "content": "Make it blue"}]
    r = _responses(client, items)
    assert r.status_code == 200, r.text
    r = _responses(client, [items[0], {k: v for k, v in call.items() if k != "id"}, items[2]])
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "input[1].id"


def test_web_search_call_sent_back_with_an_api_source(client: httpx.Client) -> None:
    def search(source: dict[str, Any]) -> dict[str, Any]:
        action = {"type": "search", "query": "weather in Paris", "sources": [source]}
        return {"type": "web_search_call", "id": "ws_0123", "status": "completed", "action": action}

    ask = {"role": "user", "content": "Weather in Paris?"}
    said = {"role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]}
    for source in ({"type": "api", "name": "oai-weather"}, {"type": "url", "url": "https://example.com/paris"}):
        r = _responses(client, [ask, search(source), said, {"role": "user", "content": "Tomorrow?"}])
        assert r.status_code == 200, r.text
    r = _responses(client, [ask, search({"type": "file", "name": "x"}), said])
    assert r.status_code == 400


def test_a_function_tool_is_echoed_with_strict(client: httpx.Client) -> None:
    loose = {**FUNCTION, "strict": False}
    r = _responses(client, [{"role": "user", "content": "Capital of France?"}], tools=[FUNCTION, loose])
    assert r.status_code == 200, r.text
    echoed = r.json()["tools"]
    assert [t["strict"] for t in echoed] == [True, False]  # the default said, a choice kept
    assert {k: v for k, v in echoed[0].items() if k != "strict"} == FUNCTION


def test_a_mid_conversation_system_message_only_on_a_model_that_takes_one(client: httpx.Client) -> None:
    messages = [
        {"role": "user", "content": "Write a function."},
        {"role": "assistant", "content": "def f(): pass"},
        {"role": "user", "content": "Another."},
        {"role": "system", "content": [{"type": "text", "text": "From now on, annotate types."}]},
    ]
    for model in ("claude-opus-4-8", "claude-opus-5", "claude-sonnet-5", "sim-1"):
        r = client.post("/v1/messages", json={"model": model, "max_tokens": 100, "messages": messages})
        assert r.status_code == 200, (model, r.text)
    for model in ("claude-sonnet-4-5", "claude-opus-4-7", "claude-3-7-sonnet-latest"):
        r = client.post("/v1/messages", json={"model": model, "max_tokens": 100, "messages": messages})
        assert r.status_code == 400, model
        assert r.json()["error"]["message"] == "messages.3.role: role 'system' is not supported on this model"
