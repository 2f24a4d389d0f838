"""Provider built-in tools (web search, code execution) in the front-end protocols, scripted by the simulator
and read by tools nobody here wrote: AG-UI streams by ``ag-ui-validate`` and the ``@ag-ui/client`` package,
the Vercel AI SDK stream by the ``ai`` package's own reader (tool parts marked ``providerExecuted``, the
search's sources as ``source-url`` parts). What the answer's text cites (the simulator's scripted citations:
Responses annotations, Claude citations, Gemini grounding) comes as sources too: ``source-url`` parts, and
the AG-UI text message's end's ``metadata.citations``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import running_app, sim_profile, sse_events
from test_protocols import node, run_input, validate

from geppetto.server import create_app
from geppetto.simulator import BuiltinCall, Reply, Simulator

HITS = [
    {"title": "Paris weather", "url": "https://example.com/paris", "text": "Sunny, 21C."},
    {"title": "Paris forecast", "url": "https://example.com/forecast", "text": "Rain tomorrow."},
]


def search_and_run() -> Reply:
    return Reply(
        text="Sunny in Paris, and 2.",
        builtin=[BuiltinCall("web_search", "paris weather", HITS), BuiltinCall("code_execution", "print(1+1)", "2\n")],
    )


@pytest.fixture(params=["anthropic", "openai-responses", "gemini"])
def url(request: pytest.FixtureRequest, geppetto_sim: Simulator, tmp_path: Path) -> Iterator[str]:
    app = create_app(sim_profile(geppetto_sim, request.param), store=str(tmp_path / "s.db"))
    with running_app(app) as base:
        yield base


def provider(url: str) -> str:
    return str(httpx.get(f"{url}/api/info").json()["provider"])


async def test_ag_ui_builtin_tools_pass_the_validator(url: str, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(search_and_run())
    _, problems = await validate(url, run_input("checked", "Search the weather"))
    assert problems == []
    geppetto_sim.queue(search_and_run())
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(f"{url}/ag-ui", json=run_input("read", "Search the weather"))
    events = [e["data"] for e in sse_events(response.text.splitlines())]
    starts = [e for e in events if e["type"] == "TOOL_CALL_START"]
    searched = provider(url) != "gemini"  # Gemini's search is only its grounding (the answer's citations)
    assert [e["toolCallName"] for e in starts] == ["web_search", "code_execution"][0 if searched else 1 :]
    assert all(e["metadata"]["provider_executed"] is True for e in starts)
    # what the answer cites (the search's hits), normalized, on the end of the answer's text message
    [cited] = [e for e in events if e["type"] == "TEXT_MESSAGE_END" and e.get("metadata")]
    citations = cited["metadata"]["citations"]
    assert [(c["url"], c["title"]) for c in citations] == [(h["url"], h["title"]) for h in HITS]
    if provider(url) == "anthropic":  # Claude quotes what it cites
        assert [c["cited_text"] for c in citations] == [h["text"] for h in HITS]
    else:  # the span of the answer each cites: here the whole answer
        assert {(c["start"], c["end"]) for c in citations} == {(0, len(search_and_run().text))}
    results = {e["toolCallId"]: e for e in events if e["type"] == "TOOL_CALL_RESULT"}
    assert set(results) == {e["toolCallId"] for e in starts}  # every call answered
    if provider(url) == "gemini":  # a code run without ids: its result answers the open call of its tool
        assert results[starts[0]["toolCallId"]]["content"] == "2\n" and starts[0]["toolCallId"]
        return
    search = results[starts[0]["toolCallId"]]
    if provider(url) == "anthropic":  # the search's hits come back, as the result's text and in its metadata
        found = [{"url": h["url"], "title": h["title"]} for h in HITS]
        assert search["metadata"]["sources"] == found and json.loads(search["content"]) == found
        assert results[starts[1]["toolCallId"]]["content"] == "2\n"
    else:  # the Responses call item holds the whole call: answered with no output at the step's end
        assert search["content"] == ""
    assert events[-1]["type"] == "RUN_FINISHED"


def test_the_ai_package_reads_builtin_tools_and_sources(url: str, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(search_and_run())
    result = node("vercel_client.mjs", url + "/api/chat", "chat-builtin", "Search the weather")
    assert result["errors"] == []
    parts: list[dict[str, Any]] = result["message"]["parts"]
    [code] = [p for p in parts if p["type"] == "tool-code_execution"]
    assert code["providerExecuted"] is True and code["state"] == "output-available"
    text = "".join(p["text"] for p in parts if p["type"] == "text")
    assert text == "Sunny in Paris, and 2."
    # the answer cites the search's hits (Responses annotations, Claude citations, Gemini grounding): each
    # source once, though the search's result found them too
    sources = [(p["url"], p.get("title")) for p in parts if p["type"] == "source-url"]
    assert sources == [(h["url"], h["title"]) for h in HITS]
    if provider(url) == "gemini":  # no search call (its grounding is the answer's citations); a code run
        assert [p for p in parts if p["type"] == "tool-web_search"] == []
        assert code["output"] == "2\n"
        return
    [search] = [p for p in parts if p["type"] == "tool-web_search"]
    assert search["providerExecuted"] is True and search["state"] == "output-available"
    assert "paris weather" in str(search["input"])
    if provider(url) == "anthropic":
        assert search["output"] == [{"url": h["url"], "title": h["title"]} for h in HITS]
        assert code["output"] == "2\n"
    else:
        assert search["output"] is None


def test_the_ag_ui_client_package_reads_builtin_tools(url: str, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(search_and_run())
    result = node("agui_client.mjs", url + "/ag-ui", "Search the weather")
    assert result["errors"] == []
    calls = 1 if provider(url) == "gemini" else 2
    assert result["types"].count("TOOL_CALL_START") == calls and result["types"].count("TOOL_CALL_RESULT") == calls
    assert result["types"][-1] == "RUN_FINISHED"
