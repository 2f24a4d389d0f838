"""The front-end protocols, checked by tools nobody here wrote: AG-UI streams by ``ag-ui-validate`` (the
protocol's conformance validator), the Vercel AI SDK stream by the ``ai`` package's own reader in Node."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import NODE_DIR, node_modules, running_app, sim_profile, sse_events

from geppetto.runtime import demo_registry
from geppetto.server import create_app
from geppetto.session.stores import open_store
from geppetto.simulator import Simulator


@pytest.fixture
def url(geppetto_sim: Simulator, tmp_path: Path) -> Iterator[str]:
    app = create_app(sim_profile(geppetto_sim), store=str(tmp_path / "s.db"), tools=demo_registry())
    with running_app(app) as base:
        yield base


def run_input(thread: str, *texts: str) -> dict[str, Any]:
    messages = [
        {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": text} for i, text in enumerate(texts)
    ]
    return {"threadId": thread, "runId": f"run-{thread}", "state": {}, "messages": messages, "tools": [], "context": []}


async def validate(url: str, body: dict[str, Any]) -> tuple[Any, list[str]]:
    from ag_ui_validate.transport import TransportOptions, validate_endpoint

    result = await validate_endpoint(url + "/ag-ui", TransportOptions(input=body, timeout_ms=30_000))
    problems = [f"{d.rule} {d.severity}: {d.message}" for d in result.report.diagnostics]
    return result, problems


@pytest.mark.parametrize(
    "texts",
    [("Hello there",), ("What is the weather in Paris?",), ("Hi", "Hello! How can I help?", "Tell me a story")],
    ids=["text", "tool-call", "history"],
)
async def test_ag_ui_streams_pass_the_validator(url: str, texts: tuple[str, ...]) -> None:
    thread = f"t-{len(texts)}-{abs(hash(texts[-1]))}"
    result, problems = await validate(url, run_input(thread, *texts))
    assert problems == []
    assert result.event_count >= 4
    async with httpx.AsyncClient() as client:
        session = (await client.get(f"{url}/api/sessions/{thread}")).json()
        first = (await client.get(f"{url}/api/sessions/{thread}/snapshots/1")).json()["turn"]
    turn = session["latest"]
    if len(texts) == 3:  # earlier messages seeded the new thread
        assert [b["kind"] for b in first["blocks"]] == ["user", "llm_text"]
    assert turn["blocks"][-1]["kind"] == "llm_text"


async def test_ag_ui_tool_calls_and_errors(url: str, geppetto_sim: Simulator) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(f"{url}/ag-ui", json=run_input("tools", "What is the weather in Paris?"))
    types = [e["data"]["type"] for e in sse_events(response.text.splitlines())]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    for kind in ("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "TEXT_MESSAGE_CONTENT"):
        assert kind in types
    geppetto_sim.fail_next(400)
    _, problems = await validate(url, run_input("fails", "Hello"))
    assert problems == []
    geppetto_sim.fail_next(400)
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{url}/ag-ui", json=run_input("fails2", "Hello"))
    last = list(sse_events(response.text.splitlines()))[-1]["data"]
    assert last["type"] == "RUN_ERROR" and last["code"] == "inference_failed" and "400" in last["message"]


async def test_ag_ui_run_started_goes_out_before_the_inference_begins(geppetto_sim: Simulator, tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    app = create_app(sim_profile(geppetto_sim), store=store)
    with running_app(app) as base:
        lease = await store.try_lock("held")  # another inference of the thread holds it
        assert lease is not None
        try:
            async with httpx.AsyncClient(timeout=30) as client:
                response = await client.post(f"{base}/ag-ui", json=run_input("held", "Hello"))
            _, problems = await validate(base, run_input("held", "Hello"))
        finally:
            await lease.release()
        async with httpx.AsyncClient(timeout=30) as client:  # the thread free again: it runs
            after = await client.post(f"{base}/ag-ui", json=run_input("held", "Hello"))
    store.close()
    assert response.status_code == 200
    events = [e["data"] for e in sse_events(response.text.splitlines())]
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert (events[0]["threadId"], events[0]["runId"]) == ("held", "run-held")
    assert events[1]["code"] == "session_busy" and "is running an inference" in events[1]["message"]
    assert problems == []
    types = [e["data"]["type"] for e in sse_events(after.text.splitlines())]
    assert types[0] == "RUN_STARTED" and types.count("RUN_STARTED") == 1 and types[-1] == "RUN_FINISHED"


def node(script: str, *args: str) -> dict[str, Any]:
    node_modules()
    done = subprocess.run(
        ["node", str(NODE_DIR / script), *args],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@pytest.mark.parametrize("text", ["Hello there", "What is the weather in Paris?"], ids=["text", "tool-call"])
def test_the_ai_package_reads_the_vercel_stream(url: str, text: str) -> None:
    result = node("vercel_client.mjs", url + "/api/chat", f"chat-{len(text)}", text)
    assert result["header"] == "v1"
    assert result["errors"] == []
    message = result["message"]
    assert message["role"] == "assistant"
    kinds = [p["type"] for p in message["parts"]]
    assert "text" in kinds
    answer = "".join(p["text"] for p in message["parts"] if p["type"] == "text")
    session = httpx.get(f"{url}/api/sessions/chat-{len(text)}").json()
    saved = [b for b in session["latest"]["blocks"] if b["kind"] == "llm_text"]
    assert answer == "".join(b["payload"]["text"] for b in saved)
    if "weather" in text:
        [tool] = [p for p in message["parts"] if p["type"] == "tool-get_weather"]
        assert tool["state"] == "output-available" and tool["output"]["city"] == "Paris"


def test_the_ag_ui_client_package_reads_the_stream(url: str) -> None:
    result = node("agui_client.mjs", url + "/ag-ui", "What is the weather in Paris?")
    assert result["errors"] == []
    assert result["types"][0] == "RUN_STARTED" and result["types"][-1] == "RUN_FINISHED"
    assert "TOOL_CALL_RESULT" in result["types"]
