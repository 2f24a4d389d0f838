"""Tool calls that wait for a person: approve, deny and mixed decisions in one step, client-side tools,
policies (tool, registry, session), expiry, the errors that name the fix, and a restore in a new process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import geppetto as gp
from geppetto.events import Event
from geppetto.session.stores import open_store
from geppetto.tools import APPROVAL, ToolRegistry, ToolReportedError
from geppetto.tools.mcp import McpTool, is_destructive
from geppetto.turns import Block, BlockKind

ran: list[str] = []


@gp.tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    ran.append(f"delete {path}")
    return f"deleted {path}"


def read_file(path: str) -> str:
    """Read a file."""
    ran.append(f"read {path}")
    return f"contents of {path}"


@gp.tool(requires_approval=lambda args: args["amount"] > 100)
def pay(amount: int) -> str:
    """Pay an amount."""
    ran.append(f"pay {amount}")
    return f"paid {amount}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def _calls(*calls: tuple[str, str, dict[str, Any]]) -> list[Block]:
    return [Block.tool_call(cid, name, args) for cid, name, args in calls]


def _session(steps: list[Any], **kw: Any) -> tuple[gp.Session, gp.ScriptedEngine, list[Event]]:
    engine = gp.ScriptedEngine(steps)
    events: list[Event] = []
    session = gp.Session(engine, tools=kw.pop("tools", [delete_file, read_file, pay]), sinks=[events.append], **kw)
    return session, engine, events


def _uses(turn: gp.Turn) -> dict[str, tuple[str, str | None]]:
    return {
        b.payload["id"]: (b.payload.get("result"), b.payload.get("error"))
        for b in turn.blocks
        if b.kind is BlockKind.TOOL_USE
    }


async def test_a_call_that_needs_approval_ends_the_inference_pending_and_an_approval_runs_it() -> None:
    session, engine, events = _session([_calls(("c1", "delete_file", {"path": "a.txt"})), Block.llm_text("Deleted.")])
    out = await session.run("delete a.txt")
    assert [b.kind for b in out.blocks] == [BlockKind.USER, BlockKind.TOOL_CALL]
    assert ran == [] and engine.remaining == 1
    assert APPROVAL.get(out.blocks[1].metadata)["state"] == "pending"
    [pending] = session.pending_approvals
    assert (pending.call_id, pending.name, pending.arguments, pending.kind) == (
        "c1",
        "delete_file",
        {"path": "a.txt"},
        "approval",
    )
    [asked] = [e for e in events if e.type == "approval_requested"]
    assert asked.calls[0]["call_id"] == "c1" and asked.to_dict()["calls"][0]["name"] == "delete_file"

    final = await session.resume({"c1": True})
    assert ran == ["delete a.txt"] and session.pending_approvals == []
    assert [b.kind for b in final.blocks][1:] == [BlockKind.TOOL_CALL, BlockKind.TOOL_USE, BlockKind.LLM_TEXT]
    assert _uses(final) == {"c1": ("deleted a.txt", None)} and final.blocks[-1].text == "Deleted."
    assert final.id == out.id  # the same turn goes on
    assert engine.turns[-1].blocks[-1].kind is BlockKind.TOOL_USE  # the model saw the result
    assert APPROVAL.get(final.blocks[1].metadata)["state"] == "approved"


async def test_approve_deny_and_mixed_decisions_in_one_step() -> None:
    step = _calls(
        ("c1", "delete_file", {"path": "a"}),
        ("c2", "read_file", {"path": "b"}),
        ("c3", "delete_file", {"path": "c"}),
        ("c4", "delete_file", {"path": "d"}),
    )
    session, engine, _ = _session([step, Block.llm_text("ok")])
    await session.run("clean up")
    assert ran == ["read b"]  # the call that needs no approval ran at once
    assert [p.call_id for p in session.pending_approvals] == ["c1", "c3", "c4"]
    final = await session.resume({"c1": True, "c3": False, "c4": "keep d, it is needed"})
    assert ran == ["read b", "delete a"]
    uses = _uses(final)
    assert uses["c1"] == ("deleted a", None) and uses["c2"] == ("contents of b", None)
    assert uses["c3"][1] == "the user denied this tool call; do not retry it"
    assert uses["c4"][1] == "the user denied this tool call: keep d, it is needed"
    seen = engine.turns[-1]
    assert sum(b.kind is BlockKind.TOOL_USE for b in seen.blocks) == 4


async def test_a_partial_decision_runs_what_was_decided_and_keeps_waiting_for_the_rest() -> None:
    step = _calls(("c1", "delete_file", {"path": "a"}), ("c2", "delete_file", {"path": "b"}))
    session, engine, _ = _session([step, Block.llm_text("ok")])
    await session.run("delete both")
    middle = await session.resume({"c1": True})
    assert ran == ["delete a"] and [p.call_id for p in session.pending_approvals] == ["c2"]
    assert engine.remaining == 1 and middle.blocks[-1].kind is BlockKind.TOOL_USE
    final = await session.resume({"c2": "no"})
    assert final.blocks[-1].text == "ok" and ran == ["delete a"]


async def test_a_predicate_on_the_arguments_decides_per_call() -> None:
    session, _, _ = _session(
        [_calls(("c1", "pay", {"amount": 5}), ("c2", "pay", {"amount": 500})), Block.llm_text("ok")]
    )
    await session.run("pay")
    assert ran == ["pay 5"] and [p.call_id for p in session.pending_approvals] == ["c2"]


async def test_the_session_policy_wins_over_the_tools_and_the_registry_policy_over_each_tool() -> None:
    session, _, _ = _session([_calls(("c1", "delete_file", {"path": "a"})), Block.llm_text("ok")], approval=False)
    out = await session.run("delete a")
    assert ran == ["delete a"] and out.blocks[-1].text == "ok"

    ran.clear()
    registry = ToolRegistry([read_file], approval=lambda name, args: args["path"].startswith("/etc"))
    session, _, _ = _session(
        [_calls(("c1", "read_file", {"path": "/etc/passwd"}), ("c2", "read_file", {"path": "x"})), "ok"],
        tools=registry,
    )
    await session.run("read")
    assert ran == ["read x"] and [p.call_id for p in session.pending_approvals] == ["c1"]

    ran.clear()
    session, _, _ = _session([_calls(("c1", "read_file", {"path": "x"})), Block.llm_text("ok")], approval=True)
    await session.run("read")
    assert ran == [] and [p.call_id for p in session.pending_approvals] == ["c1"]


async def test_a_client_side_tool_waits_for_the_clients_result() -> None:
    def pick_color(prompt: str) -> str:
        """Ask the user to pick a color in the browser."""
        raise AssertionError("never called")

    picker = gp.client_tool(pick_color)
    assert picker.definition.parameters["required"] == ["prompt"]
    session, _, _ = _session(
        [_calls(("c1", "pick_color", {"prompt": "which?"})), Block.llm_text("Blue it is.")],
        tools=[picker, read_file],
        approval=False,  # a client tool waits for the client whatever the approval policy
    )
    await session.run("pick a color")
    [waiting] = session.pending_approvals
    assert waiting.kind == "client"
    final = await session.resume({"c1": {"color": "blue"}})
    assert _uses(final)["c1"] == ('{"color":"blue"}', None) and final.blocks[-1].text == "Blue it is."
    assert "result" not in APPROVAL.get(final.blocks[1].metadata)  # the tool_use holds it, once


async def test_a_client_side_tool_by_schema_and_a_client_error() -> None:
    picker = gp.client_tool(
        name="geolocate", description="Where the user is.", parameters={"type": "object", "properties": {}}
    )
    assert picker.definition.to_dict() == {
        "name": "geolocate",
        "description": "Where the user is.",
        "parameters": {"type": "object", "properties": {}},
    }
    session, _, _ = _session([_calls(("c1", "geolocate", {})), Block.llm_text("ok")], tools=[picker])
    await session.run("where am I")
    final = await session.resume({"c1": ToolReportedError("permission denied by the browser")})
    assert _uses(final)["c1"] == ("", "permission denied by the browser")


def test_client_tool_errors_name_the_fix() -> None:
    with pytest.raises(gp.ToolDefinitionError, match="client_tool\\(stub\\)"):
        gp.client_tool()
    with pytest.raises(gp.ToolDefinitionError, match="JSON object schema"):
        gp.client_tool(name="x", parameters={"type": "string"})
    with pytest.raises(gp.ToolDefinitionError, match="requires_approval must be"):
        gp.tool(requires_approval="yes")(read_file)  # type: ignore[call-overload]
    with pytest.raises(gp.UsageError, match="ToolRegistry\\(approval"):
        ToolRegistry([], approval="always")  # type: ignore[arg-type]
    with pytest.raises(gp.UsageError, match="expires_s"):
        gp.ApprovalPolicy(expires_s=0)
    with pytest.raises(gp.UsageError, match=r"require=\.\.\."):
        gp.ApprovalPolicy(require="x")  # type: ignore[arg-type]


async def test_a_session_with_waiting_calls_cannot_be_prompted_until_they_are_resolved_or_dropped() -> None:
    session, _, _ = _session([_calls(("c1", "delete_file", {"path": "a"})), Block.llm_text("fine")])
    await session.run("delete a")
    with pytest.raises(
        gp.ApprovalPendingError, match=r"c1 \(delete_file\).*session\.resume\(\{'c1': True\}\).*drop_pending"
    ) as info:
        session.prompt("something else")
    assert [c.call_id for c in info.value.calls] == ["c1"]
    with pytest.raises(gp.ApprovalPendingError):
        session.append(gp.Turn())
    dropped = await session.drop_pending("the user changed the subject")
    assert _uses(dropped)["c1"] == ("", "this tool call was dropped without running: the user changed the subject")
    assert session.pending_approvals == [] and ran == []
    out = await session.run("something else")
    assert out.blocks[-1].text == "fine"


async def test_resume_errors_name_the_fix() -> None:
    session, _, _ = _session([_calls(("c1", "delete_file", {"path": "a"})), Block.llm_text("ok")])
    with pytest.raises(gp.UsageError, match=r"no tool call waiting.*session.prompt"):
        await session.resume({"c1": True})
    await session.run("delete a")
    with pytest.raises(gp.UsageError, match=r"no tool call 'nope' waits.*waiting: c1"):
        await session.resume({"nope": True})
    with pytest.raises(gp.UsageError, match=r"must be True \(approve\), False \(deny\) or a string"):
        await session.resume({"c1": 3})
    with pytest.raises(gp.UsageError, match="mapping of call id"):
        await session.resume(["c1"])  # type: ignore[arg-type]
    assert [p.call_id for p in session.pending_approvals] == ["c1"]  # nothing changed
    with pytest.raises(gp.UsageError, match=r"no tool call waiting"):
        await gp.Session(gp.ScriptedEngine([])).drop_pending()


async def test_an_expired_approval_is_refused_and_the_session_can_be_prompted() -> None:
    session, _, _ = _session(
        [_calls(("c1", "delete_file", {"path": "a"})), Block.llm_text("too late"), Block.llm_text("next")],
        approval=gp.ApprovalPolicy(expires_s=0.05),
    )
    await session.run("delete a")
    [waiting] = session.pending_approvals
    assert waiting.expires_at is not None and not waiting.expired
    await asyncio.sleep(0.08)
    assert session.pending_approvals[0].expired
    final = await session.resume({"c1": True})  # approved too late: it stays refused
    assert (
        ran == []
        and _uses(final)["c1"][1] == "nobody approved this tool call in time (the request expired); it was not run"
    )

    session, _, _ = _session(
        [_calls(("c1", "delete_file", {"path": "a"})), Block.llm_text("next")],
        approval=gp.ApprovalPolicy(expires_s=0.05),
    )
    await session.run("delete a")
    await asyncio.sleep(0.08)
    out = await session.run("never mind")  # an expired call does not block the next prompt
    kinds = [b.kind for b in out.blocks]
    assert kinds == [BlockKind.USER, BlockKind.TOOL_CALL, BlockKind.TOOL_USE, BlockKind.USER, BlockKind.LLM_TEXT]
    assert "expired" in (out.blocks[2].payload.get("error") or "")


def test_mcp_tools_annotated_destructive_ask_by_default() -> None:
    from mcp.types import Tool, ToolAnnotations

    def spec(**notes: Any) -> SimpleNamespace:
        return SimpleNamespace(annotations=SimpleNamespace(**notes) if notes is not None else None)

    assert is_destructive(SimpleNamespace(annotations=None)) is False
    assert is_destructive(spec(destructive_hint=True)) is True
    assert is_destructive(spec(title="rm")) is True  # the protocol's default for destructiveHint is true
    assert is_destructive(spec(read_only_hint=True)) is False
    assert is_destructive(spec(read_only_hint=False, destructive_hint=False)) is False
    assert is_destructive(spec(readOnlyHint=True)) is False  # the wire's spelling too
    assert is_destructive(Tool(name="rm", inputSchema={}, annotations=ToolAnnotations(destructiveHint=True)))
    assert not is_destructive(Tool(name="ls", inputSchema={}, annotations=ToolAnnotations(readOnlyHint=True)))
    server: Any = SimpleNamespace(prefix="fs_", name="fs")
    rm = McpTool(server, Tool(name="rm", inputSchema={"type": "object"}, annotations=ToolAnnotations(title="rm")))
    ls = McpTool(server, Tool(name="ls", inputSchema={"type": "object"}))
    assert rm.requires_approval is True and ls.requires_approval is False


_RESUME_SCRIPT = """
import asyncio, json, sys
import geppetto as gp
from geppetto.session.stores import open_store

@gp.tool(requires_approval=True)
def delete_file(path: str) -> str:
    '''Delete a file.'''
    return f"deleted {path} in another process"

async def main():
    engine = gp.ScriptedEngine([gp.Block.llm_text("done")])
    session = await gp.Session.restore(engine, open_store(sys.argv[1]), sys.argv[2], tools=[delete_file])
    print(json.dumps([p.to_dict() for p in session.pending_approvals]))
    out = await session.resume({"c1": True, "c2": "not that one"})
    print(json.dumps([b.payload for b in out.blocks if b.kind is gp.BlockKind.TOOL_USE]))

asyncio.run(main())
"""


async def test_a_restored_session_in_a_new_process_sees_and_resumes_the_waiting_calls(tmp_path: Path) -> None:
    target = str(tmp_path / "s.db")
    store = open_store(target)
    session, _, _ = _session(
        [_calls(("c1", "delete_file", {"path": "a"}), ("c2", "delete_file", {"path": "b"}))], store=store
    )
    await session.run("delete a and b")
    script = tmp_path / "resume.py"
    script.write_text(textwrap.dedent(_RESUME_SCRIPT))
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, str(script), target, session.session_id], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    waiting, uses = (json.loads(line) for line in done.stdout.splitlines())
    assert [(w["call_id"], w["kind"], w["arguments"]) for w in waiting] == [
        ("c1", "approval", {"path": "a"}),
        ("c2", "approval", {"path": "b"}),
    ]
    assert uses[0]["result"] == "deleted a in another process"
    assert uses[1]["error"] == "the user denied this tool call: not that one"
    again = await gp.Session.restore(gp.ScriptedEngine([]), open_store(target), session.session_id)
    assert again.pending_approvals == [] and again.latest is not None and again.latest.blocks[-1].text == "done"
    assert ran == []  # nothing ran in this process


async def test_an_inference_cannot_start_while_calls_wait_undecided() -> None:
    session, engine, _ = _session([_calls(("c1", "delete_file", {"path": "a"})), Block.llm_text("ok")])
    await session.run("delete a")
    with pytest.raises(gp.ApprovalPendingError, match=r"cannot start an inference: .*c1 \(delete_file\)"):
        session.start_inference()
    assert engine.remaining == 1
