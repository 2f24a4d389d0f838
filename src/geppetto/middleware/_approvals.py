"""The tool loop's side of calls that wait for a person (see ``geppetto.tools._approval``): holding them
after a model step, and answering them once they are decided."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..events import EventApprovalRequested, EventMetadata, EventToolResult, metadata_for, publish
from ..tools import (
    APPROVAL,
    ApprovalPolicy,
    RunJournal,
    ToolRegistry,
    awaiting,
    decided,
    interrupted_policy,
    mark_waiting,
    needs_person,
    refusal_for,
    registry_require,
)
from ..turns import PAYLOAD_ID, PAYLOAD_NAME, Block, Turn

__all__ = ["answer_decided", "hold_for_people", "still_waiting"]

Execute = Callable[..., Awaitable[list[Block]]]


def hold_for_people(
    turn: Turn,
    registry: ToolRegistry,
    pending: Sequence[Block],
    policy: ApprovalPolicy,
    journal: RunJournal | None = None,
) -> tuple[list[Block], list[Block]]:
    """Split a step's ``pending`` calls into those to run now and those that wait; mark the waiting ones
    and publish ``approval_requested`` for them. A call the ``journal`` shows was interrupted mid-run waits
    when its tool's policy is ``"ask"`` (its state then says ``interrupted``)."""
    rule = registry_require(registry)
    run_now: list[Block] = []
    held: list[tuple[Block, str]] = []
    asked: list[Block] = []
    for call in pending:
        call_id = str(call.payload.get(PAYLOAD_ID, ""))
        t = registry.get(str(call.payload.get(PAYLOAD_NAME, "")))
        if journal is not None and journal.result(call_id) is not None:
            run_now.append(call)  # answered from the journal, whatever it would need now
            continue
        if journal is not None and journal.interrupted(call_id) and t is not None:
            if interrupted_policy(t) == "ask":
                held.append((call, "pending"))
                asked.append(call)
            else:
                run_now.append(call)  # the executor retries it or answers that it was interrupted
            continue
        kind = needs_person(t, call, policy, rule)
        if kind is None:
            run_now.append(call)
        else:
            held.append((call, kind))
    if held:
        calls = mark_waiting(held, policy)
        for call in asked:
            APPROVAL.set(call.metadata, {**(APPROVAL.get(call.metadata) or {}), "interrupted": True})
        publish(EventApprovalRequested(metadata_for(turn), calls=[c.to_dict() for c in calls]))
    return run_now, [b for b, _ in held]


def still_waiting(turn: Turn) -> bool:
    return bool(awaiting(turn))


async def answer_decided(turn: Turn, registry: ToolRegistry, execute: Execute) -> bool:
    """Answer the decided calls of ``turn``: run the approved ones (through ``execute``), refuse the
    denied, expired and dropped ones, and give client-side ones the client's answer. One ``tool_use``
    per call, in call order. Returns whether any call was answered."""
    ready = decided(turn)
    if not ready:
        return False
    meta = metadata_for(turn)
    approved = [b for b, s in ready if s.get("state") == "approved"]
    ran = iter(await execute(registry, approved, metadata=meta, turn=turn) if approved else [])
    answers = []
    for block, state in ready:
        if state.get("state") == "approved":
            answers.append(next(ran))
        else:
            answers.append(_answer(block, state, meta))
        kept = {k: v for k, v in state.items() if k != "result"}  # the tool_use holds the client's result
        APPROVAL.set(block.metadata, kept)
    turn.extend(answers)
    return True


def _answer(block: Block, state: dict[str, Any], meta: EventMetadata) -> Block:
    call_id, name = str(block.payload.get(PAYLOAD_ID, "")), str(block.payload.get(PAYLOAD_NAME, ""))
    error = refusal_for(state)
    result = None if error is not None else str(state.get("result", ""))
    denied = state.get("state") == "denied"
    publish(EventToolResult(meta, call_id=call_id, name=name, result=result, error=error, denied=denied))
    return Block.tool_use(call_id, result if error is None else "", error)
