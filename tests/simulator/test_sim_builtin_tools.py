"""The services' own tools served with scripted results, in each API's kinds, streamed and sent back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google.genai import types as genai
from pydantic import ValidationError
from simhelp import sse_events

from geppetto.simulator import BuiltinCall, Reply, Simulator

HEADERS = {"authorization": "Bearer sk-sim", "x-api-key": "sk-sim", "x-goog-api-key": "sim", "anthropic-version": "1"}
SEARCH = "Search the web for the latest Mars news"
CALCULATE = "Calculate 3 * 12390 please"


@pytest.fixture
def client(geppetto_sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=geppetto_sim.url, headers=HEADERS, timeout=10) as c:
        yield c


def _types(text: str) -> list[str]:
    out: list[str] = []
    for _, data in sse_events(text):
        kind = data.get("type") if isinstance(data, dict) else None
        if kind and (not out or out[-1] != kind):
            out.append(kind)
    return out


def test_responses_web_search_with_citations_chained_and_stateless(client: httpx.Client) -> None:
    body = {"model": "gpt-4.1", "input": SEARCH, "tools": [{"type": "web_search"}]}
    first = client.post("/v1/responses", json=body).json()
    search, message = first["output"]
    assert search == {
        "id": search["id"],
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": SEARCH},
    }
    assert search["id"].startswith("ws_")
    part = message["content"][0]
    citation = part["annotations"][0]
    assert citation["type"] == "url_citation" and citation["url"].startswith("https://example.com/")
    assert (citation["start_index"], citation["end_index"]) == (0, len(part["text"]))
    chained = client.post("/v1/responses", json={**body, "input": "Thanks", "previous_response_id": first["id"]})
    assert chained.status_code == 200
    resend = [{"role": "user", "content": SEARCH}, *first["output"], {"role": "user", "content": "Thanks"}]
    stateless = client.post("/v1/responses", json={**body, "input": resend, "store": False})
    assert stateless.status_code == 200, stateless.text


def test_responses_code_interpreter_outputs_only_when_included(client: httpx.Client) -> None:
    body = {
        "model": "gpt-4.1",
        "input": CALCULATE,
        "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}],
    }
    plain = client.post("/v1/responses", json=body).json()["output"][0]
    assert (plain["type"], plain["code"], plain["outputs"]) == ("code_interpreter_call", "print(3 * 12390)", None)
    assert plain["container_id"].startswith("cntr_")
    included = client.post("/v1/responses", json={**body, "include": ["code_interpreter_call.outputs"]}).json()
    assert included["output"][0]["outputs"] == [{"type": "logs", "logs": "37170\n"}]
    assert included["output"][1]["content"][0]["text"] == "The code printed 37170."
    stream = client.post("/v1/responses", json={**body, "stream": True})
    assert _types(stream.text)[2:9] == [
        "response.output_item.added",
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
        "response.output_item.done",
    ]


def test_responses_file_search_streams_its_progress(client: httpx.Client) -> None:
    tools = [{"type": "file_search", "vector_store_ids": ["vs_1"]}]
    body = {"model": "gpt-4.1", "input": "What does the document say?", "tools": tools, "stream": True}
    types = _types(client.post("/v1/responses", json=body).text)
    assert types[3:6] == [
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
    ]
    assert "response.output_text.annotation.added" in types


def test_a_tool_not_offered_is_not_run(client: httpx.Client) -> None:
    answer = client.post("/v1/responses", json={"model": "gpt-4.1", "input": SEARCH}).json()
    assert [i["type"] for i in answer["output"]] == ["message"]


def _claude(client: httpx.Client, tools: list[Any], messages: list[Any], **extra: Any) -> httpx.Response:
    body = {"model": "claude-sim", "max_tokens": 500, "messages": messages, "tools": tools, **extra}
    return client.post("/v1/messages", json=body)


def test_claude_web_search_blocks_citations_usage_and_resend(client: httpx.Client) -> None:
    tools = [{"type": "web_search_20250305", "name": "web_search", "max_uses": 2}]
    asked = [{"role": "user", "content": SEARCH}]
    message = _claude(client, tools, asked).json()
    use, result, text = message["content"]
    assert use == {"type": "server_tool_use", "id": use["id"], "name": "web_search", "input": {"query": SEARCH}}
    assert result["type"] == "web_search_tool_result" and result["tool_use_id"] == use["id"]
    assert {r["type"] for r in result["content"]} == {"web_search_result"}
    assert text["citations"][0]["type"] == "web_search_result_location"
    assert message["usage"]["server_tool_use"] == {"web_search_requests": 1, "web_fetch_requests": 0}
    again = [*asked, {"role": "assistant", "content": message["content"]}, {"role": "user", "content": "Thanks"}]
    assert _claude(client, tools, again).status_code == 200
    stream = _claude(client, tools, asked, stream=True)
    starts = [
        d["content_block"]["type"] for _, d in sse_events(stream.text) if d and d["type"] == "content_block_start"
    ]
    assert starts == ["server_tool_use", "web_search_tool_result", "text"]
    deltas = {d["delta"]["type"] for _, d in sse_events(stream.text) if d and d["type"] == "content_block_delta"}
    assert deltas == {"input_json_delta", "citations_delta", "text_delta"}


def test_claude_code_execution_runs_in_a_container(client: httpx.Client) -> None:
    tools = [{"type": "code_execution_20250825", "name": "code_execution"}]
    message = _claude(client, tools, [{"role": "user", "content": CALCULATE}]).json()
    use, result, text = message["content"]
    assert use["name"] == "bash_code_execution" and "3 * 12390" in use["input"]["command"]
    assert result["content"] == {
        "type": "bash_code_execution_result",
        "stdout": "37170\n",
        "stderr": "",
        "return_code": 0,
        "content": [],
    }
    assert text["text"] == "The code printed 37170."
    assert message["container"]["id"].startswith("container_")


def test_claude_web_fetch(client: httpx.Client) -> None:
    tools = [{"type": "web_fetch_20250910", "name": "web_fetch"}]
    message = _claude(client, tools, [{"role": "user", "content": "Summarize https://example.org/a"}]).json()
    use, result, _ = message["content"]
    assert use["input"] == {"url": "https://example.org/a"}
    assert result["content"]["type"] == "web_fetch_result" and result["content"]["url"] == "https://example.org/a"
    assert message["usage"]["server_tool_use"]["web_fetch_requests"] == 1


def _gemini(client: httpx.Client, tools: list[Any], text: str, method: str = "generateContent") -> httpx.Response:
    body = {"contents": [{"role": "user", "parts": [{"text": text}]}], "tools": tools}
    query = "?alt=sse" if method == "streamGenerateContent" else ""
    return client.post(f"/v1beta/models/gemini-2.0-flash:{method}{query}", json=body)


def test_gemini_code_execution_parts_and_resend(client: httpx.Client) -> None:
    answer = _gemini(client, [{"codeExecution": {}}], CALCULATE).json()
    parts = answer["candidates"][0]["content"]["parts"]
    assert parts == [
        {"executableCode": {"language": "PYTHON", "code": "print(3 * 12390)"}},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "37170\n"}},
        {"text": "The code printed 37170."},
    ]
    contents = [{"role": "user", "parts": [{"text": CALCULATE}]}, {"role": "model", "parts": parts},
                {"role": "user", "parts": [{"text": "Thanks"}]}]  # fmt: skip
    again = client.post("/v1beta/models/gemini-2.0-flash:generateContent", json={"contents": contents})
    assert again.status_code == 200


def test_gemini_search_grounding(client: httpx.Client) -> None:
    candidate = _gemini(client, [{"googleSearch": {}}], SEARCH).json()["candidates"][0]
    grounding = candidate["groundingMetadata"]
    assert grounding["webSearchQueries"] == [SEARCH]
    assert SEARCH in grounding["searchEntryPoint"]["renderedContent"]
    assert [c["web"]["uri"][:20] for c in grounding["groundingChunks"]] == ["https://example.com/"] * 2
    text = candidate["content"]["parts"][0]["text"]
    assert grounding["groundingSupports"][0]["segment"]["endIndex"] == len(text)
    streamed = _gemini(client, [{"googleSearch": {}}], SEARCH, "streamGenerateContent")
    last = [d for _, d in sse_events(streamed.text) if d][-1]
    assert last["candidates"][0]["groundingMetadata"] == grounding


def test_a_queued_builtin_call_is_rendered_for_each_api(client: httpx.Client, geppetto_sim: Simulator) -> None:
    call = BuiltinCall("web_search", "weather Oslo", [{"title": "Yr", "url": "https://example.com/yr", "text": "5C"}])
    geppetto_sim.queue(*(Reply(text="It is 5C.", builtin=[call]) for _ in range(3)))
    responses = client.post("/v1/responses", json={"model": "gpt-4.1", "input": "hi"}).json()
    assert responses["output"][0]["action"]["query"] == "weather Oslo"
    claude = _claude(client, [], [{"role": "user", "content": "hi"}]).json()
    assert claude["content"][1]["content"][0]["url"] == "https://example.com/yr"
    gemini = _gemini(client, [], "hi").json()
    assert gemini["candidates"][0]["groundingMetadata"]["groundingChunks"] == [
        {"web": {"uri": "https://example.com/yr", "title": "Yr"}}
    ]


def test_gemini_3_server_side_invocations_are_signed_parts(client: httpx.Client) -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": SEARCH}]}],
        "tools": [{"googleSearch": {}}],
        "toolConfig": {"includeServerSideToolInvocations": True},
    }
    url = "/v1beta/models/gemini-3-flash-preview:generateContent"
    parts = client.post(url, json=body).json()["candidates"][0]["content"]["parts"]
    call, response, text = parts
    assert call["toolCall"]["toolType"] == "GOOGLE_SEARCH_WEB"
    assert call["toolCall"]["args"] == {"queries": [SEARCH]}
    assert response["toolResponse"]["id"] == call["toolCall"]["id"]
    assert response["toolResponse"]["response"]["results"][0]["uri"].startswith("https://example.com/")
    assert all(p["thoughtSignature"] for p in parts)
    turn = [*body["contents"], {"role": "model", "parts": parts}, {"role": "user", "parts": [{"text": "More"}]}]
    assert client.post(url, json={**body, "contents": turn}).status_code == 200
    forged = {**call, "thoughtSignature": "Zm9yZ2Vk"}
    current = [*body["contents"], {"role": "model", "parts": [forged, response, text]}]
    refused = client.post(url, json={**body, "contents": current})
    assert (refused.status_code, refused.json()["error"]["message"]) == (400, "Corrupted thought signature.")


def test_gemini_answers_fit_the_sdk_types(client: httpx.Client) -> None:
    """google-genai's response types refuse unknown keys, so each built-in answer is checked against them."""
    with pytest.raises(ValidationError):
        genai.GenerateContentResponse.model_validate({"candidates": [{"groundingMetadata": {"bogus": 1}}]})
    cases: list[tuple[list[Any], str, str, dict[str, Any]]] = [
        ([{"googleSearch": {}}], SEARCH, "gemini-2.5-flash", {}),
        ([{"codeExecution": {}}], CALCULATE, "gemini-2.5-flash", {}),
        ([{"urlContext": {}}], "Summarize https://example.org/a", "gemini-2.5-flash", {}),
        (
            [{"googleSearch": {}}],
            SEARCH,
            "gemini-3-flash-preview",
            {"toolConfig": {"includeServerSideToolInvocations": True}},
        ),
    ]
    for tools, text, model, extra in cases:
        body = {"contents": [{"role": "user", "parts": [{"text": text}]}], "tools": tools, **extra}
        answer = client.post(f"/v1beta/models/{model}:generateContent", json=body).json()
        parsed = genai.GenerateContentResponse.model_validate(answer)
        assert parsed.candidates and parsed.candidates[0].content and parsed.candidates[0].content.parts


def test_code_runs_only_evaluate_arithmetic() -> None:
    from geppetto.simulator._builtin import scripted

    assert scripted("code_execution", "what is (2+3)*4?").output == "20\n"
    assert scripted("code_execution", "halve 7 / 2").output == "3.5\n"
    # Not arithmetic, or beyond a float: the run prints the question's length instead of failing.
    huge = "1" + "0" * 300
    for text in ["run __import__('os')", "compute 1" + "0" * 400 + " * 10", f"compute {huge} * 2 * {huge}"]:
        call = scripted("code_execution", text)
        assert call.query.startswith("print(len(") and call.output.strip().isdigit()


def test_claude_pause_turn_is_continued_with_the_blocks_sent_back(
    client: httpx.Client, geppetto_sim: Simulator
) -> None:
    search = BuiltinCall("web_search", "Mars", [{"title": "Mars", "url": "https://example.com/mars", "text": "Red."}])
    geppetto_sim.queue(Reply(builtin=[search], stop="pause_turn"), Reply(text="Mars is red."))
    tools = [{"type": "web_search_20250305", "name": "web_search"}]
    asked = [{"role": "user", "content": "Search Mars"}]
    paused = _claude(client, tools, asked).json()
    assert paused["stop_reason"] == "pause_turn"
    assert [b["type"] for b in paused["content"]] == ["server_tool_use", "web_search_tool_result"]
    resumed = _claude(client, tools, [*asked, {"role": "assistant", "content": paused["content"]}])
    assert resumed.status_code == 200
    assert (resumed.json()["stop_reason"], resumed.json()["content"][-1]["text"]) == ("end_turn", "Mars is red.")
