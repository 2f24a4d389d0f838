"""Built-in tool events through the protocol streams, event by event: calls paired with their results (by id,
else the earliest open call of the tool), results without a call, errors, calls the provider answered
without a separate result, and sources (a web page, a provider's file) given once per message, whether a
built-in result found them or the answer's text cites them (``citations`` events)."""

from __future__ import annotations

import json
from typing import Any

from geppetto.server.agui import AGUIStream
from geppetto.server.vercel import VercelStream


def builtin(phase: str, tool: str, call_id: str = "", **fields: Any) -> dict[str, Any]:
    return {"type": "builtin_tool", "phase": phase, "tool": tool, "call_id": call_id, **fields}


def vercel(*events: dict[str, Any]) -> list[dict[str, Any]]:
    stream = VercelStream("m1")
    run = [{"type": "run_started"}, {"type": "start"}, *events, {"type": "final"}]
    run.append({"type": "run_finished", "status": "completed"})
    return [chunk for event in run for chunk in stream.feed(event)]


def test_vercel_pairs_calls_without_ids_in_order_and_marks_them_provider_executed() -> None:
    chunks = vercel(
        builtin("call", "code_execution", input="print(1)"),
        builtin("call", "code_execution", input="print(2)"),
        builtin("result", "code_execution", output="1\n"),
        builtin("result", "code_execution", output="2\n"),
    )
    inputs = [c for c in chunks if c["type"] == "tool-input-available"]
    outputs = [c for c in chunks if c["type"] == "tool-output-available"]
    assert [c["input"] for c in inputs] == ["print(1)", "print(2)"]
    assert [(c["toolCallId"], c["output"]) for c in outputs] == [
        (inputs[0]["toolCallId"], "1\n"),
        (inputs[1]["toolCallId"], "2\n"),
    ]
    assert inputs[0]["toolCallId"] != inputs[1]["toolCallId"]
    assert all(c["providerExecuted"] is True and c["toolName"] == "code_execution" for c in inputs)
    assert all(c["providerExecuted"] is True for c in outputs)
    assert [c["type"] for c in chunks][-2:] == ["finish-step", "finish"]


def test_vercel_results_sources_errors_and_calls_without_results() -> None:
    web = [{"url": "https://example.com/a", "title": "A"}, {"url": "file-123", "title": "notes.txt"}]
    chunks = vercel(
        builtin("result", "web_search", "ws1", sources=web),  # its call was not seen
        builtin("result", "file_search", "fs1", sources=[web[0]]),  # a source already given
        builtin("call", "mcp", "m1", name="lookup", input={"q": 1}),
        builtin("result", "mcp", "m1", error=True, output="denied"),
        builtin("call", "web_search", "ws2", input={"query": "x"}),  # a call item that holds it all
    )
    assert chunks[:3] == [{"type": "start", "messageId": "m1"}, {"type": "start-step"}, chunks[2]]
    by_call: dict[str, list[dict[str, Any]]] = {}
    for c in chunks:
        if "toolCallId" in c:
            by_call.setdefault(c["toolCallId"], []).append(c)
    assert [c["type"] for c in by_call["ws1"]] == ["tool-input-available", "tool-output-available"]
    assert by_call["ws1"][0]["input"] == {} and by_call["ws1"][1]["output"] == web
    assert by_call["m1"][1] == {
        "type": "tool-output-error",
        "toolCallId": "m1",
        "errorText": "denied",
        "providerExecuted": True,
    }
    assert by_call["ws2"][1] == {
        "type": "tool-output-available",
        "toolCallId": "ws2",
        "output": None,
        "providerExecuted": True,
    }
    sources = [c for c in chunks if c["type"].startswith("source-")]
    assert sources == [
        {"sourceId": "ws1-0", "type": "source-url", "url": "https://example.com/a", "title": "A"},
        {"sourceId": "ws1-1", "type": "source-document", "mediaType": "application/octet-stream", "title": "notes.txt"},
    ]
    assert [c["type"] for c in chunks][-2:] == ["finish-step", "finish"]


def agui(*events: dict[str, Any]) -> list[dict[str, Any]]:
    stream = AGUIStream("t", "r")
    run = [{"type": "run_started"}, {"type": "text_delta", "delta": "Hi"}, *events, {"type": "final"}]
    run.append({"type": "run_finished", "status": "completed"})
    out = [e for event in run for e in stream.feed(event)]
    return [json.loads(e.model_dump_json(by_alias=True, exclude_none=True)) for e in out]


def test_ag_ui_builtin_calls_results_and_sources() -> None:
    found = [{"url": "https://example.com/a", "title": "A"}]
    events = agui(
        builtin("call", "web_search", "ws1", input={"query": "x"}),
        builtin("result", "web_search", "ws1", sources=found),
        builtin("result", "code_execution", output="2\n"),  # its call was not seen
        builtin("call", "code_execution", "c2", input="print(3)"),  # answered by nothing apart
    )
    types = [e["type"] for e in events]
    assert types[:4] == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"]
    starts = [e for e in events if e["type"] == "TOOL_CALL_START"]
    assert [e["toolCallName"] for e in starts] == ["web_search", "code_execution", "code_execution"]
    assert all(e["metadata"] == {"provider_executed": True, "builtin_tool": e["toolCallName"]} for e in starts)
    results = {e["toolCallId"]: e for e in events if e["type"] == "TOOL_CALL_RESULT"}
    assert set(results) == {e["toolCallId"] for e in starts} and len(starts) == 3
    assert json.loads(results["ws1"]["content"]) == found and results["ws1"]["metadata"]["sources"] == found
    assert results[starts[1]["toolCallId"]]["content"] == "2\n"
    assert results["c2"]["content"] == "" and results["c2"]["metadata"] == {"provider_executed": True}
    args = [e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS"]
    assert args == ['{"query": "x"}', "{}", '"print(3)"']
    assert types[-1] == "RUN_FINISHED"


def cited(*citations: dict[str, Any]) -> dict[str, Any]:
    return {"type": "citations", "citations": list(citations)}


def test_vercel_sources_of_the_answers_citations_each_once_per_message() -> None:
    a = {"url": "https://example.com/a", "title": "A", "start": 0, "end": 2}
    chunks = vercel(
        {"type": "text_delta", "delta": "Hi"},
        cited(a, {**a, "start": 3, "end": 5}, {"document": "Report", "title": "Report", "cited_text": "x"}),
        builtin("result", "web_search", "ws1", sources=[{"url": a["url"], "title": "A"}]),  # already a source
        {"type": "final"},
        {"type": "start"},
        {"type": "text_delta", "delta": "More"},
        cited({"url": "https://example.com/b"}, {"document": "file-1"}, {"title": "no source"}),
    )
    sources = [c for c in chunks if c["type"].startswith("source-")]
    assert [{k: v for k, v in s.items() if k != "sourceId"} for s in sources] == [
        {"type": "source-url", "url": "https://example.com/a", "title": "A"},
        {"type": "source-document", "mediaType": "application/octet-stream", "title": "Report"},
        {"type": "source-url", "url": "https://example.com/b"},
        {"type": "source-document", "mediaType": "application/octet-stream", "title": "file-1"},
    ]
    assert len({s["sourceId"] for s in sources}) == 4
    types = [c["type"] for c in chunks]
    assert types.index("source-url") > types.index("text-delta")  # the text part stays open
    first = types.index("source-url")
    assert types[first + 2 : first + 4] == ["text-end", "tool-input-available"]


def test_ag_ui_citations_end_the_text_message_or_follow_it() -> None:
    a = {"url": "https://example.com/a", "title": "A", "start": 0, "end": 2}
    events = agui(cited(a), {"type": "reasoning_delta", "delta": "hm"}, cited({"document": "file-1"}), cited())
    ends = [e for e in events if e["type"] == "TEXT_MESSAGE_END"]
    assert len(ends) == 1 and ends[0]["metadata"] == {"citations": [a]}
    [start] = [e for e in events if e["type"] == "TEXT_MESSAGE_START"]
    # a model call's text already closed: a CUSTOM event naming it
    [custom] = [e for e in events if e["type"] == "CUSTOM"]
    assert custom["name"] == "citations"
    assert custom["value"] == {"messageId": start["messageId"], "citations": [{"document": "file-1"}]}
    assert [e["type"] for e in events].count("REASONING_START") == 1
