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
from geppetto.server import agui, create_app, vercel
from geppetto.simulator import Simulator
from geppetto.tools import PendingCall, ToolRegistry

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


def _call(call_id: str, kind: str = "approval") -> PendingCall:
    return PendingCall(call_id, "t", {}, kind, 0.0)  # type: ignore[arg-type]


def test_ag_ui_resume_entries_and_tool_messages_become_decisions() -> None:
    waiting = {"a": _call("a"), "b": _call("b"), "c": _call("c"), "d": _call("d"), "k": _call("k", "client")}
    run = agui.parse_input(
        {
            "threadId": "t",
            "runId": "r",
            "state": {},
            "tools": [],
            "context": [],
            "messages": [
                {"id": "m1", "role": "user", "content": "hi"},
                {"id": "m2", "role": "tool", "toolCallId": "k", "content": "blue"},
            ],
            "resume": [
                {"interruptId": "a", "status": "resolved", "payload": {"approved": True}},
                {"interruptId": "b", "status": "resolved", "payload": {"approved": False, "reason": "no"}},
                {"interruptId": "c", "status": "cancelled"},
                {"interruptId": "d", "status": "resolved"},
            ],
        }
    )
    assert agui.wants_resume(run)
    assert agui.resume_decisions(run, waiting) == {
        "a": True,
        "b": "no",
        "c": "the user cancelled the approval",
        "d": True,
        "k": "blue",
    }
    bad = run.model_copy(update={"resume": [run.resume[0].model_copy(update={"payload": {"ok": 1}})]})  # type: ignore[index]
    with pytest.raises(ValueError, match=r"must be \{'approved': true\|false"):
        agui.resume_decisions(bad, waiting)


def test_a_bad_ag_ui_resume_payload_or_tool_schema_is_a_422(url: str) -> None:
    base = {"threadId": "t-bad", "runId": "r", "state": {}, "context": [], "messages": []}
    response = httpx.post(
        url + "/ag-ui",
        json={**base, "tools": [], "resume": [{"interruptId": "x", "status": "resolved", "payload": [1]}]},
    )
    assert response.status_code == 422 and "'approved': true|false" in response.json()["error"]["message"]
    tool = {"name": "pick", "description": "", "parameters": {"type": "string"}}
    response = httpx.post(
        url + "/ag-ui", json={**base, "tools": [tool], "messages": [{"id": "u", "role": "user", "content": "hi"}]}
    )
    assert response.status_code == 422 and "must be a JSON object schema" in response.json()["error"]["message"]


def test_vercel_tool_parts_become_decisions() -> None:
    waiting = {i: _call(i) for i in "abcd"} | {"k": _call("k", "client"), "e": _call("e", "client")}

    def part(call_id: str, state: str, **more: Any) -> dict[str, Any]:
        return {"type": "tool-x", "toolCallId": call_id, "state": state, "input": {}, **more}

    message = {
        "id": "m",
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "hi"},
            part("a", "approval-responded", approval={"id": "a", "approved": True}),
            part("b", "approval-responded", approval={"id": "b", "approved": False, "reason": "no"}),
            part("c", "approval-responded", approval={"id": "c", "approved": False}),
            part("d", "approval-requested", approval={"id": "d"}),  # not answered yet: keeps waiting
            part("k", "output-available", output={"color": "blue"}),
            part("e", "output-error", errorText="no camera"),
            part("zz", "output-available", output=1),  # does not wait: ignored
        ],
    }
    assert vercel.resumed_message({"messages": [message]}) is message
    assert vercel.resumed_message({"messages": [{"role": "user", "parts": []}]}) is None
    decisions = vercel.resume_decisions(message, waiting)
    assert {k: v for k, v in decisions.items() if k != "e"} == {
        "a": True,
        "b": "no",
        "c": False,
        "k": {"color": "blue"},
    }
    assert str(decisions["e"]) == "no camera"
