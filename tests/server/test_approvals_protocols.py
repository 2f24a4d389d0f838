"""Tool approvals and client-side tools over the front-end protocols, read by the official client packages in
Node: AG-UI's interrupt and resume (``@ag-ui/client``), its client-side tools answered by tool messages, and
the Vercel AI SDK's tool approval and tool output parts (the ``ai`` package, v6)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import NODE_DIR, node_modules, running_app, sim_profile

import geppetto as gp
from geppetto.server import create_app
from geppetto.simulator import Simulator
from geppetto.tools import ToolRegistry

deleted: list[str] = []


@gp.tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    deleted.append(path)
    return f"deleted {path}"


PICK_COLOR = gp.client_tool(
    name="pick_color",
    description="Ask the user to pick a color.",
    parameters={"type": "object", "properties": {"subject": {"type": "string"}}, "required": ["subject"]},
)


@pytest.fixture
def url(geppetto_sim: Simulator, tmp_path: Path) -> Iterator[str]:
    deleted.clear()
    tools = ToolRegistry([delete_file, PICK_COLOR])
    with running_app(create_app(sim_profile(geppetto_sim), store=str(tmp_path / "s.db"), tools=tools)) as base:
        yield base


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


def _blocks(url: str, sid: str) -> list[dict[str, Any]]:
    return list(httpx.get(f"{url}/api/sessions/{sid}").json()["latest"]["blocks"])


@pytest.mark.parametrize("mode", ["approve", "deny"])
def test_ag_ui_interrupts_for_an_approval_and_resumes_with_the_answer(url: str, mode: str) -> None:
    result = node("agui_approval.mjs", url + "/ag-ui", f"agui-{mode}", mode)
    assert result["errors"] == []
    first, second = result["runs"]
    assert first["types"][0] == "RUN_STARTED" and first["types"][-1] == "RUN_FINISHED"
    assert "TOOL_CALL_END" in first["types"] and "TOOL_CALL_RESULT" not in first["types"]
    [interrupt] = first["outcome"]["interrupts"]
    assert interrupt["reason"] == "tool_approval" and interrupt["toolCallId"] == interrupt["id"]
    assert first["pendingInterrupts"] == [
        {"id": interrupt["id"], "toolCallId": interrupt["id"], "reason": "tool_approval"}
    ]
    assert second["types"][-1] == "RUN_FINISHED" and second["outcome"] in (None, {"type": "success"})
    assert "TOOL_CALL_RESULT" in second["types"] and second["pendingInterrupts"] == []
    [use] = [b for b in _blocks(url, f"agui-{mode}") if b["kind"] == "tool_use"]
    if mode == "approve":
        assert deleted == ["a.txt"] and result["toolMessages"] == ["deleted a.txt"]
    else:
        assert deleted == [] and use["payload"]["error"] == "the user denied this tool call: keep it"
    assert result["answer"]


def test_ag_ui_client_side_tools_are_answered_by_a_tool_message(url: str) -> None:
    result = node("agui_approval.mjs", url + "/ag-ui", "agui-client", "client")
    assert result["errors"] == []
    first, second = result["runs"]
    assert first["outcome"]["type"] == "success" and len(first["outcome"]["pendingToolCallIds"]) == 1
    assert "TOOL_CALL_RESULT" not in second["types"]  # the client holds the result it sent
    assert result["toolMessages"] == ["blue"]
    blocks = _blocks(url, "agui-client")
    [use] = [b for b in blocks if b["kind"] == "tool_use"]
    assert use["payload"]["result"] == "blue" and blocks[-1]["kind"] == "llm_text"
    assert "blue" in result["answer"]


@pytest.mark.parametrize("mode", ["approve", "deny", "client"])
def test_the_ai_package_reads_tool_approval_and_client_tool_parts(url: str, mode: str) -> None:
    result = node("vercel_approval.mjs", url + "/api/chat", f"chat-{mode}", mode)
    assert result["errors"] == []
    first, second = result["first"], result["second"]
    name = "tool-pick_color" if mode == "client" else "tool-delete_file"
    [waiting] = [p for p in first["parts"] if p["type"] == name]
    assert waiting["state"] == ("input-available" if mode == "client" else "approval-requested")
    if mode != "client":
        assert waiting["approval"]["id"] == waiting["toolCallId"]
    assert second["id"] == first["id"]  # the reply continues the same message
    [done] = [p for p in second["parts"] if p["type"] == name]
    texts = [p["text"] for p in second["parts"] if p["type"] == "text"]
    assert texts and texts[-1]
    if mode == "approve":
        assert done["state"] == "output-available" and done["output"] == "deleted a.txt" and deleted == ["a.txt"]
    elif mode == "deny":
        assert done["state"] == "output-denied" and deleted == []
    else:
        assert done["state"] == "output-available" and done["output"] == {"color": "blue"}
        [use] = [b for b in _blocks(url, f"chat-{mode}") if b["kind"] == "tool_use"]
        assert use["payload"]["result"] == '{"color":"blue"}'


def test_a_request_that_answers_nothing_that_waits_is_refused(url: str) -> None:
    body = {
        "id": "chat-none",
        "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
            {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "hello"}]},
        ],
    }
    httpx.post(url + "/api/sessions", json={"id": "chat-none"})
    response = httpx.post(url + "/api/chat", json=body)
    assert response.status_code == 409 and "no tool call waiting" in response.json()["error"]["message"]
