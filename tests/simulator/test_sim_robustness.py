"""Bad input never yields a 5xx, and 200 concurrent streams complete."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geppetto.simulator import Simulator, serve

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "model",
                    "input",
                    "messages",
                    "role",
                    "content",
                    "type",
                    "id",
                    "call_id",
                    "parts",
                    "contents",
                    "items",
                    "tools",
                    "max_tokens",
                    "metadata",
                    "text",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)
ENDPOINTS = [
    ("/v1/responses", {"authorization": "Bearer k"}),
    ("/v1/chat/completions", {"authorization": "Bearer k"}),
    ("/v1/conversations", {"authorization": "Bearer k"}),
    ("/v1/messages", {"x-api-key": "k"}),
    ("/v1beta/models/g:generateContent", {"x-goog-api-key": "k"}),
    ("/v1beta/interactions", {"x-goog-api-key": "k"}),
]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
# One valid request per API that uses every field the simulator reads; the tests below break one field at a time.
VALID: dict[str, tuple[str, dict[str, str], dict[str, Any]]] = {
    "responses": (
        "/v1/responses",
        {"authorization": "Bearer k"},
        {
            "model": "sim-1",
            "instructions": "Be brief",
            "input": [
                {"role": "user", "content": "Weather in Oslo?"},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "please"}]},
                {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Oslo"}'},
                {"type": "function_call_output", "call_id": "call_1", "output": "5C"},
            ],
            "tools": [{"type": "function", "name": "get_weather", "parameters": SCHEMA, "strict": None}],
            "tool_choice": {"type": "function", "name": "get_weather"},
            "text": {"format": {"type": "json_schema", "name": "answer", "schema": SCHEMA}},
            "reasoning": {"effort": "low", "summary": "auto"},
            "include": ["reasoning.encrypted_content"],
            "metadata": {"k": "v"},
            "temperature": 0.5,
            "max_output_tokens": 100,
            "store": True,
            "stream": False,
        },
    ),
    "chat": (
        "/v1/chat/completions",
        {"authorization": "Bearer k"},
        {
            "model": "sim-1",
            "messages": [
                {"role": "system", "content": "Be brief"},
                {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "5C"},
            ],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}],
            "tool_choice": "auto",
            "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}},
            "stream": False,
            "stream_options": {"include_usage": True},
            "max_tokens": 50,
        },
    ),
    "conversations": (
        "/v1/conversations",
        {"authorization": "Bearer k"},
        {
            "items": [{"role": "user", "content": "hi"}, {"type": "message", "role": "assistant", "content": "yo"}],
            "metadata": {"k": "v"},
        },
    ),
    "anthropic": (
        "/v1/messages",
        {"x-api-key": "k"},
        {
            "model": "claude-sim",
            "max_tokens": 2048,
            "system": [{"type": "text", "text": "Be brief"}],
            "messages": [
                {"role": "user", "content": "Weather in Oslo?"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Oslo"}}],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "5C"}]}
                    ],
                },
                {"role": "assistant", "content": "It is 5C."},
                {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
            ],
            "tools": [{"name": "get_weather", "description": "weather", "input_schema": SCHEMA}],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": False},
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "temperature": 0.5,
            "stop_sequences": ["END"],
            "metadata": {"user_id": "u"},
            "stream": False,
        },
    ),
    "gemini": (
        "/v1beta/models/gemini-2.0-flash:generateContent",
        {"x-goog-api-key": "k"},
        {
            "systemInstruction": {"parts": [{"text": "Be brief"}]},
            "contents": [
                {"role": "user", "parts": [{"text": "Weather in Oslo?"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}]},
                {
                    "role": "user",
                    "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "5C"}}}],
                },
            ],
            "tools": [
                {"functionDeclarations": [{"name": "get_weather", "description": "weather", "parameters": SCHEMA}]}
            ],
            "toolConfig": {"functionCallingConfig": {"mode": "AUTO", "allowedFunctionNames": ["get_weather"]}},
            "generationConfig": {
                "temperature": 0.5,
                "maxOutputTokens": 100,
                "responseMimeType": "text/plain",  # not JSON: Gemini 2 refuses JSON with function calling
                "thinkingConfig": {"includeThoughts": False, "thinkingBudget": 0},
            },
        },
    ),
    "interactions": (
        "/v1beta/interactions",
        {"x-goog-api-key": "k"},
        {
            "model": "gemini-2.5-flash",
            "system_instruction": "Be brief",
            "input": [
                {"type": "user_input", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
                {"type": "thought", "summary": [{"type": "text", "text": "Call the tool."}]},
                {"type": "function_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Oslo"}},
                {"type": "function_result", "call_id": "c1", "name": "get_weather", "result": "5C"},
            ],
            "tools": [{"type": "function", "name": "get_weather", "description": "weather", "parameters": SCHEMA}],
            "generation_config": {
                "tool_choice": {"allowed_tools": {"mode": "auto", "tools": ["get_weather"]}},
                "thinking_summaries": "auto",
                "max_output_tokens": 100,
            },
            "response_format": {"type": "text", "mime_type": "text/plain"},
            "store": True,
            "stream": False,
        },
    ),
}
DELETE = object()
Path = tuple[str | int, ...]


def _paths(value: Any, prefix: Path = ()) -> list[Path]:
    """Every key and index inside `value`, outermost first."""
    children: list[tuple[str | int, Any]] = []
    if isinstance(value, dict):
        children = list(value.items())
    elif isinstance(value, list):
        children = list(enumerate(value))
    return [p for key, inner in children for p in [(*prefix, key), *_paths(inner, (*prefix, key))]]


PATHS = [(api, path) for api, (_, _, body) in VALID.items() for path in _paths(body)]


def _mutated(body: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(body))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    if value is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return copy


def _other_type(value: Any) -> Any:
    """A value of a different JSON type than `value`."""
    if isinstance(value, bool) or value is None:
        return "x"
    if isinstance(value, int | float):
        return "7"
    if isinstance(value, str):
        return 7
    return [1] if isinstance(value, dict) else {"x": 1}


def _assert_answer(client: httpx.Client, api: str, body: dict[str, Any]) -> None:
    path, headers, _ = VALID[api]
    r = client.post(client.base_url.join(path), json=body, headers={"authorization": "", **headers})
    assert r.status_code == 200 or 400 <= r.status_code < 500, (api, body, r.status_code, r.text)
    if r.status_code >= 400:
        assert "error" in r.json()


def test_valid_bodies_are_valid(oai: httpx.Client) -> None:
    for api, (path, headers, body) in VALID.items():
        r = oai.post(oai.base_url.join(path), json=body, headers={"authorization": "", **headers})
        assert r.status_code == 200, (api, r.text)


def test_every_field_with_a_wrong_type_gets_4xx_or_200(oai: httpx.Client) -> None:
    for api, path in PATHS:
        body = VALID[api][2]
        original = _mutated(body, path, DELETE)  # also proves the path exists
        assert original != body
        parent: Any = body
        for key in path:
            parent = parent[key]
        _assert_answer(oai, api, _mutated(body, path, _other_type(parent)))
    assert oai.post("/responses", json={"model": "m", "input": "still serving"}).status_code == 200


WRONG = st.sampled_from([None, True, False, 0, -1, 2.5, "", "x", [], [1], ["x"], [{}], {}, {"x": 1}, DELETE]) | JSON


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(PATHS), value=WRONG)
def test_random_wrong_values_in_any_field_get_4xx_or_200(
    oai: httpx.Client, target: tuple[str, Path], value: Any
) -> None:
    api, path = target
    _assert_answer(oai, api, _mutated(VALID[api][2], path, value))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=JSON, which=st.integers(0, len(ENDPOINTS) - 1))
def test_random_bodies_get_4xx_or_200(oai: httpx.Client, body: Any, which: int) -> None:
    path, headers = ENDPOINTS[which]
    r = oai.post(oai.base_url.join(path), json=body, headers={"authorization": "", **headers})
    assert r.status_code < 500, (path, body, r.text)
    if r.status_code >= 400:
        assert "error" in r.json()


def test_bad_json_unknown_ids_and_oversize(oai: httpx.Client) -> None:
    r = oai.post("/responses", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("We could not parse the JSON body")
    r = oai.post("/responses", json=[1, 2])
    assert r.json()["error"]["message"] == "The request body must be a JSON object."
    r = oai.post("/responses", json={"model": "m", "input": 7})
    assert (r.status_code, r.json()["error"]["param"]) == (400, "input")
    assert oai.get("/responses/resp_unknown").json() == {
        "error": {
            "message": "Response with id 'resp_unknown' not found.",
            "type": "invalid_request_error",
            "param": "response_id",
            "code": None,
        }
    }
    assert oai.get("/nothing/here").status_code == 404
    with serve(max_body=1000) as small:
        r = httpx.post(
            small.openai_url + "/responses",
            json={"model": "m", "input": "x" * 2000},
            headers={"authorization": "Bearer k"},
        )
        assert r.status_code == 413 and "limit is 1000 bytes" in r.json()["error"]["message"]
    r = httpx.post(oai.base_url.join("/v1/responses"), json={"model": "m", "input": "x"})
    assert r.status_code == 401


def test_recorded_size_is_the_real_body_length(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    raw = b'{"model":   "m",\n "input": "h\\u00e9llo"}  '
    assert oai.post("/responses", content=raw, headers={"content-type": "application/json"}).status_code == 200
    [recorded] = geppetto_sim.requests
    assert (recorded.method, recorded.path, recorded.size) == ("POST", "/v1/responses", len(raw))
    assert recorded.body == {"model": "m", "input": "h\u00e9llo"}


def test_oversize_requests_are_recorded_with_their_real_size() -> None:
    raw = json.dumps({"model": "m", "input": "x" * 3000}).encode()

    def chunked() -> Any:
        yield raw[:1500]
        yield raw[1500:]

    with serve(max_body=1000) as small:
        headers = {"authorization": "Bearer k", "content-type": "application/json"}
        declared = httpx.post(small.openai_url + "/responses", content=raw, headers=headers)
        streamed = httpx.post(small.openai_url + "/responses", content=chunked(), headers=headers)
        for r in (declared, streamed):
            assert r.status_code == 413
            assert r.json()["error"]["message"] == (
                f"Request body is {len(raw)} bytes; the limit is 1000 bytes. Send a smaller request."
            )
        assert [(q.path, q.body, q.size) for q in small.requests] == [("/v1/responses", None, len(raw))] * 2
        assert "transfer-encoding" in small.requests[1].headers
        r = httpx.post(small.openai_url + "/responses", json={"model": "m", "input": "x"}, headers=headers)
        assert r.status_code == 200


async def test_200_concurrent_streams(geppetto_sim: Simulator) -> None:
    limits = httpx.Limits(max_connections=200)
    async with httpx.AsyncClient(
        base_url=geppetto_sim.openai_url, headers={"authorization": "Bearer k"}, limits=limits, timeout=30
    ) as client:

        async def one(i: int) -> str:
            async with client.stream("POST", "/responses", json={"model": "m", "input": f"n{i}", "stream": True}) as r:
                body = (await r.aread()).decode()
            return body.strip().split("\n\n")[-1].split("\n")[0]

        finals = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(200))), timeout=60)
    assert finals == ["event: response.completed"] * 200
