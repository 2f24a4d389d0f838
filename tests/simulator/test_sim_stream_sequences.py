"""Whole streamed event sequences against provider-apis.md §4-§7: reasoning summaries, incomplete terminals,
Anthropic tool_use deltas, Gemini function-call chunks with thought signatures, Chat without usage."""

from __future__ import annotations

import json
from typing import Any

import httpx
from simhelp import sse_events

from geppetto.simulator import Reply, Simulator, ToolCall


def _events(client: httpx.Client, url: str, body: dict[str, Any]) -> list[tuple[str | None, Any]]:
    with client.stream("POST", url, json=body) as r:
        assert (r.status_code, r.headers["content-type"].split(";")[0]) == (200, "text/event-stream")
        return sse_events(r.read().decode())


def test_responses_reasoning_summary_and_incomplete_terminal(oai: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="Done now", reasoning="Think hard", stop="max_tokens"))
    events = _events(oai, "/responses", {"model": "sim-1", "input": "x", "stream": True})
    final = events[-1][1]["response"]
    reasoning, message = final["output"]
    rs, msg = {"item_id": reasoning["id"], "output_index": 0}, {"item_id": message["id"], "output_index": 1}
    summary = {"type": "summary_text", "text": "Think hard"}
    text = {"type": "output_text", "text": "Done now", "annotations": [], "logprobs": []}
    expected: list[tuple[str, dict[str, Any]]] = [
        ("response.output_item.added", {"output_index": 0, "item": events[2][1]["item"]}),
        ("response.reasoning_summary_part.added", {**rs, "summary_index": 0, "part": {**summary, "text": ""}}),
        ("response.reasoning_summary_text.delta", {**rs, "summary_index": 0, "delta": "Think "}),
        ("response.reasoning_summary_text.delta", {**rs, "summary_index": 0, "delta": "hard"}),
        ("response.reasoning_summary_text.done", {**rs, "summary_index": 0, "text": "Think hard"}),
        ("response.reasoning_summary_part.done", {**rs, "summary_index": 0, "part": summary}),
        ("response.output_item.done", {"output_index": 0, "item": reasoning}),
        (
            "response.output_item.added",
            {"output_index": 1, "item": {**message, "status": "in_progress", "content": []}},
        ),
        (
            "response.content_part.added",
            {**msg, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}},
        ),
        ("response.output_text.delta", {**msg, "content_index": 0, "delta": "Done ", "logprobs": []}),
        ("response.output_text.delta", {**msg, "content_index": 0, "delta": "now", "logprobs": []}),
        ("response.output_text.done", {**msg, "content_index": 0, "text": "Done now", "logprobs": []}),
        ("response.content_part.done", {**msg, "content_index": 0, "part": text}),
        ("response.output_item.done", {"output_index": 1, "item": message}),
    ]
    padding = [d.pop("obfuscation") for n, d in events if n == "response.output_text.delta"]
    assert len(padding) == 2 and all(isinstance(p, str) and p for p in padding)
    middle = [(name, {k: v for k, v in data.items() if k not in ("type", "sequence_number")}) for name, data in events]
    assert [n for n, _ in middle[:2]] == ["response.created", "response.in_progress"]
    assert middle[2:-1] == expected
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    assert all(d["type"] == n for n, d in events)
    added = events[2][1]["item"]
    assert (added["id"], added["summary"]) == (reasoning["id"], [])
    assert added["encrypted_content"] != reasoning["encrypted_content"]
    assert events[-1][0] == "response.incomplete"
    assert (final["status"], final["incomplete_details"]) == ("incomplete", {"reason": "max_output_tokens"})
    assert final["usage"]["output_tokens_details"]["reasoning_tokens"] > 0


def test_anthropic_tool_use_streams_input_json_deltas(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(
        Reply(text="Checking", tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, call_id="toolu_1")])
    )
    body = {"model": "claude-sim", "max_tokens": 64, "messages": [{"role": "user", "content": "x"}], "stream": True}
    with httpx.Client(base_url=geppetto_sim.url, headers={"x-api-key": "k"}) as client:
        events = _events(client, "/v1/messages", body)
    start = events[0][1]["message"]
    assert (start["content"], start["stop_reason"], start["usage"]["output_tokens"]) == ([], None, 1)
    raw = '{"city":"Oslo"}'
    pieces = [raw[i : i + 8] for i in range(0, len(raw), 8)]
    assert events[1:] == [
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        ("ping", {"type": "ping"}),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking"}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
            },
        ),
        *[
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": p}},
            )
            for p in pieces
        ],
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {
                    "input_tokens": events[0][1]["message"]["usage"]["input_tokens"],
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": events[-2][1]["usage"]["output_tokens"],
                },
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    assert len(pieces) > 1 and json.loads("".join(pieces)) == {"city": "Oslo"}
    assert events[-2][1]["usage"]["output_tokens"] > 1


def test_gemini_function_call_chunk_carries_the_thought_signature(geppetto_sim: Simulator) -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": "Weather in Lima?"}]}],
        "tools": [{"functionDeclarations": [{"name": "get_weather", "description": "Weather for a city"}]}],
        "generationConfig": {"thinkingConfig": {"includeThoughts": True}},
    }
    url = "/v1beta/models/gemini-3-pro:streamGenerateContent?alt=sse"
    with httpx.Client(base_url=geppetto_sim.url, headers={"x-goog-api-key": "k"}) as client:
        events = _events(client, url, body)
    assert all(name is None for name, _ in events)
    chunks = [data for _, data in events]
    head = {"modelVersion": "gemini-3-pro", "responseId": chunks[0]["responseId"]}
    thoughts = ["Thinking ", "about ", "the ", "request."]
    call = chunks[-1]["candidates"][0]["content"]["parts"][0]
    assert chunks == [
        *[
            {
                "candidates": [{"content": {"role": "model", "parts": [{"text": t, "thought": True}]}, "index": 0}],
                **head,
            }
            for t in thoughts
        ],
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {
                                "functionCall": {"name": "get_weather", "args": {}, "id": call["functionCall"]["id"]},
                                "thoughtSignature": call["thoughtSignature"],
                            }
                        ],
                    },
                    "index": 0,
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": chunks[-1]["usageMetadata"],
            **head,
        },
    ]
    assert call["thoughtSignature"]
    usage = chunks[-1]["usageMetadata"]
    assert usage["thoughtsTokenCount"] == 5
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"] + 5
    # The streamed call, replayed with its signature, is accepted.
    answer = {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "20C"}}}]}
    replay = {**body, "contents": [*body["contents"], {"role": "model", "parts": [call]}, answer]}
    r = httpx.post(
        geppetto_sim.url + "/v1beta/models/gemini-3-pro:generateContent", json=replay, headers={"x-goog-api-key": "k"}
    )
    assert r.status_code == 200


def test_chat_stream_without_include_usage_has_no_usage_key(oai: httpx.Client) -> None:
    events = _events(
        oai, "/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    )
    assert events[-1] == (None, "[DONE]")
    chunks = [data for _, data in events[:-1]]
    assert all("usage" not in c for c in chunks)
    assert [c["choices"][0]["delta"] for c in chunks] == [
        {"role": "assistant", "content": "", "refusal": None},
        {"content": "You "},
        {"content": "said: "},
        {"content": "hi"},
        {},
    ]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None, None, None, None, "stop"]
    assert len({c["id"] for c in chunks}) == 1
