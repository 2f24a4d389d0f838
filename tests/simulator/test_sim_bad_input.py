"""Wrong-typed fields, deep nesting and server failures get the provider's error envelope, never a bare 500."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from geppetto.simulator import Simulator

ANTHROPIC = {"model": "claude-sim", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
GEMINI_USER = {"role": "user", "parts": [{"text": "hi"}]}
V1BETA = "type.googleapis.com/google.ai.generativelanguage.v1beta."
BAD_JSON = {
    "openai": (
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP "
        "library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)"
    ),
    "anthropic": "There was an error parsing the body of your request as JSON.",
    "gemini": "Invalid JSON payload received. Unexpected token.",
}
ROUTES = {
    "openai": ("/v1/responses", {"authorization": "Bearer k"}),
    "chat": ("/v1/chat/completions", {"authorization": "Bearer k"}),
    "conversations": ("/v1/conversations", {"authorization": "Bearer k"}),
    "anthropic": ("/v1/messages", {"x-api-key": "k"}),
    "gemini": ("/v1beta/models/gemini-2.0-flash:generateContent", {"x-goog-api-key": "k"}),
}


def _anthropic_error(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def _post(sim: Simulator, route: str, **kwargs: Any) -> httpx.Response:
    path, headers = ROUTES[route]
    return httpx.post(sim.url + path, headers={**headers, **kwargs.pop("headers", {})}, timeout=10, **kwargs)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"messages": [{"role": "user", "content": [1]}]},
            "messages.0.content.0: Input should be a valid dictionary or object to extract fields from",
        ),
        ({"tools": 5}, "tools: Input should be a valid list"),
        ({"tools": [{"input_schema": {}}]}, "tools.0.name: Field required"),
        ({"messages": 5}, "messages: Input should be a valid list"),
        ({"messages": ["hi"]}, "messages.0: Input should be a valid dictionary or object to extract fields from"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages.0.content: Input should be a valid list"),
        ({"messages": [{"role": "user"}]}, "messages.0.content: Field required"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
            "messages.0.content.0.text.text: Field required",
        ),
        (
            {"messages": [{"role": "user", "content": [{"text": "x"}]}]},
            "messages.0.content.0: Unable to extract tag using discriminator 'type'",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": 7}]}]},
            "messages.0.content.0.tool_result.tool_use_id: Input should be a valid string",
        ),
        (
            {"messages": [{"role": "assistant", "content": [{"type": "thinking", "thinking": "x"}]}]},
            "messages.0.content.0.thinking.signature: Field required",
        ),
        ({"system": 5}, "system: Input should be a valid list"),
        ({"tool_choice": "auto"}, "tool_choice: Input should be a valid dictionary or object to extract fields from"),
        ({"tool_choice": {"type": "tool"}}, "tool_choice.tool.name: Field required"),
        (
            {"thinking": {"type": "enabled", "budget_tokens": "lots"}},
            "thinking.enabled.budget_tokens: Input should be a valid integer",
        ),
        ({"max_tokens": "5"}, "max_tokens: Input should be a valid integer"),
        ({"max_tokens": True}, "max_tokens: Input should be a valid integer"),
        ({"model": None}, "model: Input should be a valid string"),
        ({"stream": "yes"}, "stream: Input should be a valid boolean"),
        ({"temperature": "hot"}, "temperature: Input should be a valid number"),
        ({"stop_sequences": [1]}, "stop_sequences.0: Input should be a valid string"),
    ],
)
def test_anthropic_wrong_types(geppetto_sim: Simulator, change: dict[str, Any], message: str) -> None:
    r = _post(geppetto_sim, "anthropic", json={**ANTHROPIC, **change})
    assert r.status_code == 400
    body = r.json()
    assert body.pop("request_id").startswith("req_")
    assert body == _anthropic_error(message)


def test_anthropic_unknown_block_type_lists_the_tags(geppetto_sim: Simulator) -> None:
    r = _post(geppetto_sim, "anthropic", json={**ANTHROPIC, "messages": [{"role": "user", "content": [{"type": "x"}]}]})
    assert (r.status_code, r.json()["error"]["message"]) == (
        400,
        "messages.0.content.0: Input tag 'x' found using 'type' does not match any of the expected tags: 'text', "
        "'image', 'document', 'search_result', 'thinking', 'redacted_thinking', 'tool_use', 'tool_result', "
        "'server_tool_use', 'web_search_tool_result', 'web_fetch_tool_result', 'code_execution_tool_result', "
        "'bash_code_execution_tool_result', 'text_editor_code_execution_tool_result', 'tool_search_tool_result', "
        "'advisor_tool_result', 'mcp_tool_use', 'mcp_tool_result', 'container_upload', 'compaction', "
        "'tool_addition'",
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tools": 5}, f"Invalid value at 'tools' ({V1BETA}Tool), 5"),
        (
            {"tools": [{"functionDeclarations": [1]}]},
            f"Invalid value at 'tools[0].function_declarations[0]' ({V1BETA}FunctionDeclaration), 1",
        ),
        (
            {"tools": [{"functionDeclarations": [{"name": "f", "parameters": [1]}]}]},
            "Invalid JSON payload received. Unknown name \"parameters\" at 'tools[0].function_declarations[0]': "
            "Proto field is not repeating, cannot start list.",
        ),
        ({"generationConfig": "x"}, f"Invalid value at 'generation_config' ({V1BETA}GenerationConfig), \"x\""),
        (
            {"generationConfig": {"maxOutputTokens": "many"}},
            "Invalid value at 'generation_config.max_output_tokens' (TYPE_INT32), \"many\"",
        ),
        ({"systemInstruction": "x"}, f"Invalid value at 'system_instruction' ({V1BETA}Content), \"x\""),
        ({"toolConfig": 1}, f"Invalid value at 'tool_config' ({V1BETA}ToolConfig), 1"),
        (
            {"toolConfig": {"functionCallingConfig": {"mode": "SOMETIMES"}}},
            f"Invalid value at 'tool_config.function_calling_config.mode' ({V1BETA}FunctionCallingConfig.Mode), "
            '"SOMETIMES"',
        ),
        (
            {"contents": [GEMINI_USER, {"role": "model", "parts": [{"functionCall": "x"}]}, GEMINI_USER]},
            f"Invalid value at 'contents[1].parts[0].function_call' ({V1BETA}FunctionCall), \"x\"",
        ),
        (
            {"contents": [{"role": "user", "parts": [{"functionResponse": "x"}]}]},
            f"Invalid value at 'contents[0].parts[0].function_response' ({V1BETA}FunctionResponse), \"x\"",
        ),
        (
            {"contents": [{"role": "user", "parts": [{"text": 5}]}]},
            "Invalid value at 'contents[0].parts[0].text' (TYPE_STRING), 5",
        ),
        ({"contents": "hi"}, f"Invalid value at 'contents' ({V1BETA}Content), \"hi\""),
        (
            {"contents": [{"role": "user", "parts": []}]},
            "* GenerateContentRequest.contents[0].parts: contents.parts must not be empty.",
        ),
        (
            {"contents": [{"role": "user", "parts": [{}]}]},
            "* GenerateContentRequest.contents[0].parts[0].data: required oneof field 'data' must have one "
            "initialized field",
        ),
    ],
)
def test_gemini_wrong_types(geppetto_sim: Simulator, change: dict[str, Any], message: str) -> None:
    r = _post(geppetto_sim, "gemini", json={"contents": [GEMINI_USER], **change})
    assert r.status_code == 400
    assert r.json() == {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}


def test_responses_tool_with_list_properties_still_answers(geppetto_sim: Simulator) -> None:
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": [1]}, "strict": None}
    r = _post(geppetto_sim, "openai", json={"model": "sim-1", "input": "lookup please", "tools": [tool]})
    assert r.status_code == 200
    [call] = r.json()["output"]
    assert (call["name"], call["arguments"]) == ("lookup", "{}")


@pytest.mark.parametrize("route", list(ROUTES))
def test_deeply_nested_json_is_malformed_and_recorded(geppetto_sim: Simulator, route: str) -> None:
    raw = b"[" * 100_000
    r = _post(geppetto_sim, route, content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400
    api = route if route in ("anthropic", "gemini") else "openai"
    assert (r.json()["error"]["message"]) == BAD_JSON[api]
    [recorded] = geppetto_sim.requests
    assert (recorded.path, recorded.body, recorded.size) == (ROUTES[route][0], None, len(raw))
    assert _post(geppetto_sim, "openai", json={"model": "m", "input": "still here"}).status_code == 200


VALID = {"openai": {"model": "m", "input": "x"}, "anthropic": ANTHROPIC, "gemini": {"contents": [GEMINI_USER]}}


@pytest.mark.parametrize("route", list(VALID))
def test_parseable_but_deeply_nested_bodies_never_get_a_5xx(geppetto_sim: Simulator, route: str) -> None:
    deep = '{"a":' * 900 + "1" + "}" * 900
    bodies = {
        "openai": '{"model":"m","input":"f","tools":[{"type":"function","name":"f","parameters":%s,"strict":null}]}',
        "anthropic": '{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"f"}],'
        '"tools":[{"name":"f","input_schema":%s}]}',
        "gemini": '{"contents":[{"parts":[{"functionResponse":{"name":"f","response":%s}}]}]}',
    }
    r = _post(geppetto_sim, route, content=(bodies[route] % deep).encode())
    assert r.status_code in (200, 400), r.text
    if r.status_code == 400:
        assert r.json()["error"]["message"] == BAD_JSON[route]
    assert _post(geppetto_sim, route, json=VALID[route]).status_code == 200


SERVER_ERRORS = {
    "openai": (
        "_openai",
        VALID["openai"],
        {
            "error": {
                "message": "The server had an error while processing your request. Sorry about that!",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        },
    ),
    "anthropic": (
        "_anthropic",
        VALID["anthropic"],
        {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}},
    ),
    "gemini": (
        "_gemini",
        VALID["gemini"],
        {
            "error": {
                "code": 500,
                "message": "An internal error has occurred. Please retry or report in "
                "https://developers.generativeai.google/guide/troubleshooting",
                "status": "INTERNAL",
            }
        },
    ),
}


@pytest.mark.parametrize("route", list(SERVER_ERRORS))
def test_a_simulator_bug_answers_the_providers_server_error(
    geppetto_sim: Simulator, route: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, body, expected = SERVER_ERRORS[route]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(f"geppetto.simulator.{module}.decide", broken)
    r = _post(geppetto_sim, route, json=body)
    assert r.status_code == 500
    answer = r.json()
    answer.pop("request_id", None)
    assert answer == expected


UNPAIRED = [  # (JSON string body, yyjson's complaint, char index), for Anthropic's wording
    ('"x\\ud800"', "no low surrogate in string", 44),
    ('"\\udc00 x"', "invalid high surrogate in string", 37),
    ('"\\ud800\\u0041"', "invalid low surrogate in string", 43),
]


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize(("text", "complaint", "index"), UNPAIRED)
def test_unpaired_surrogates_are_invalid_json(
    geppetto_sim: Simulator, route: str, text: str, complaint: str, index: int
) -> None:
    raw = '{"model":"m","max_tokens":5,"input":' + text + ',"messages":[]}'
    r = _post(geppetto_sim, route, content=raw.encode(), headers={"content-type": "application/json"})
    assert r.status_code == 400
    api = route if route in ("anthropic", "gemini") else "openai"
    expected = BAD_JSON[api]
    if api == "anthropic":
        expected = f"The request body is not valid JSON: {complaint}: line 1 column {index + 1} (char {index})"
    assert r.json()["error"]["message"] == expected
    assert geppetto_sim.requests[-1].body is None
    assert _post(geppetto_sim, "openai", json={"model": "m", "input": "still here"}).status_code == 200


def test_paired_and_escaped_surrogate_text_is_fine(geppetto_sim: Simulator) -> None:
    raw = b'{"model":"m","input":"\\ud83d\\ude00 and \\\\ud800"}'
    r = _post(geppetto_sim, "openai", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 200
    assert r.json()["output"][0]["content"][0]["text"] == "You said: \U0001f600 and \\ud800"


def test_raw_surrogate_bytes_are_invalid_json(geppetto_sim: Simulator) -> None:
    raw = b'{"model":"m","input":"\xed\xa0\x80"}'  # a surrogate encoded as UTF-8: not valid UTF-8
    for route in ROUTES:
        r = _post(geppetto_sim, route, content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 400, route
