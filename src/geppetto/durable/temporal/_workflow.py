"""geppetto's session workflow: one per session, each prompt an update to it.

The workflow holds the session's latest Turn, the tool calls waiting for a person and the answers of the
current step; every provider request and every tool call is an activity, so their results are in workflow
history and a replay re-sends nothing and runs no tool again. Nothing here reads a clock, randomness or the
network except through Temporal's deterministic APIs (``workflow.uuid4``, ``workflow.now``).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from ...turns import Turn, TurnData, TurnMetadata
    from ._types import (
        Answer,
        CallInfo,
        PromptInput,
        RequestInput,
        RequestOutput,
        ResumeInput,
        SessionStart,
        ToolInput,
        ToolOutput,
    )

__all__ = ["PENDING_MEMO", "WORKFLOW", "SessionWorkflow"]

WORKFLOW = "geppetto.session"
_REQUEST = "geppetto.request"
_TOOL = "geppetto.tool"
PENDING_MEMO = "geppetto.pending_approvals"


@workflow.defn(name=WORKFLOW)
class SessionWorkflow:
    """A session's prompts, one at a time, each a chain of request and tool activities."""

    @workflow.init
    def __init__(self, start: SessionStart) -> None:
        self._start = start
        self._latest: Turn | None = start.latest
        self._busy = False
        self._calls: list[CallInfo] = []  # the calls of the latest request not answered yet
        self._answers: dict[str, Answer] = {}
        self._waiting: list[dict[str, Any]] = []  # the calls waiting for a person, as PendingCall dicts
        self._context: dict[str, str] = {}  # the current prompt's, for the workers' event relay

    @workflow.run
    async def run(self, start: SessionStart) -> None:
        # lives as long as the session; a long history starts over from the latest Turn
        await workflow.wait_condition(
            lambda: workflow.info().is_continue_as_new_suggested() and not self._busy and not self._waiting
        )
        await workflow.wait_condition(workflow.all_handlers_finished)
        start.latest = self._latest
        workflow.continue_as_new(start)

    # -- what the client asks ------------------------------------------------------------------------
    @workflow.update(name="prompt")
    async def prompt(self, prompt: PromptInput) -> Turn:
        await workflow.wait_condition(lambda: not self._busy)
        self._refuse_while_waiting("prompt")
        self._busy = True
        self._context = dict(prompt.context)
        try:
            req = RequestInput(self._spec(), str(workflow.uuid4()), self._latest, prompt, context=self._context)
            step = await self._request(req)
            return await self._loop(step)
        finally:
            self._busy = False

    @workflow.update(name="resume")
    async def resume(self, resume: ResumeInput) -> Turn:
        await workflow.wait_condition(lambda: not self._busy)
        self._busy = True
        self._context = dict(resume.context)
        decisions = resume.decisions
        try:
            waiting = {w["call_id"] for w in self._waiting}
            for call_id, decision in decisions.items():
                if call_id not in waiting:
                    continue  # checked by the validator; a second resume of the same call is a no-op
                call = next(c for c in self._calls if c.call_id == call_id)
                if decision is True:
                    self._answers[call_id] = await self._tool(call)
                else:
                    reason = decision if isinstance(decision, str) else ""
                    self._answers[call_id] = Answer(
                        call_id,
                        error="the user denied this tool call" + (f": {reason}" if reason else "; do not retry it"),
                    )
            self._set_waiting([w for w in self._waiting if w["call_id"] not in self._answers])
            if self._waiting:
                assert self._latest is not None
                return self._latest
            return await self._loop(await self._request(self._answered()))
        finally:
            self._busy = False

    @resume.validator
    def _check_resume(self, resume: ResumeInput) -> None:
        decisions = resume.decisions
        waiting = {w["call_id"] for w in self._waiting}
        for call_id, decision in decisions.items():
            if call_id not in waiting:
                raise ApplicationError(
                    f"no tool call {call_id!r} waits for a decision; waiting: {', '.join(waiting) or '(none)'}",
                    type="UsageError",
                )
            if not (isinstance(decision, (bool, str))):
                raise ApplicationError(
                    f"the decision for call {call_id} must be True (approve), False (deny) or a string "
                    f"(deny with that reason), not {decision!r}",
                    type="UsageError",
                )

    @workflow.query(name="latest")
    def latest(self) -> Turn | None:
        return self._latest

    @workflow.query(name="pending_approvals")
    def pending_approvals(self) -> list[dict[str, Any]]:
        return list(self._waiting)

    def _set_waiting(self, waiting: list[dict[str, Any]]) -> None:
        """The calls waiting for a person, also in the workflow's memo (read without any worker running)."""
        if waiting != self._waiting:
            workflow.upsert_memo({PENDING_MEMO: waiting or None})
        self._waiting = waiting

    # -- the steps ------------------------------------------------------------------------------------
    def _spec(self) -> SessionStart:
        spec = SessionStart(**{**vars(self._start), "latest": None})
        return spec

    def _refuse_while_waiting(self, action: str) -> None:
        if self._waiting:
            ids = ", ".join(f"{w['call_id']} ({w['name']})" for w in self._waiting)
            raise ApplicationError(
                f"cannot {action}: session {self._spec().session_id} has tool calls waiting for a decision: {ids}; "
                "answer them with `await session.resume({call_id: True})` (True approves, False or a reason denies)",
                type="ApprovalPendingError",
            )

    async def _loop(self, step: RequestOutput) -> Turn:
        """Run the step's tool calls and make the next request, until the model calls none (or some wait)."""
        while True:
            turn = self._latest = self._applied(step)
            self._calls = list(step.calls)
            self._answers = {}
            if not self._calls:
                return turn
            now = workflow.now().timestamp()
            runs = [c for c in self._calls if not c.needs_approval]
            results = await asyncio.gather(*(self._tool(c) for c in runs))
            self._answers = {a.call_id: a for a in results}
            self._set_waiting(
                [
                    {
                        "call_id": c.call_id,
                        "name": c.name,
                        "arguments": c.arguments,
                        "kind": "approval",
                        "requested_at": now,
                        "expires_at": None,
                    }
                    for c in self._calls
                    if c.needs_approval
                ]
            )
            if self._waiting:
                return turn  # a person decides, perhaps days later: see resume
            step = await self._request(self._answered())

    def _applied(self, step: RequestOutput) -> Turn:
        """The Turn after a request: its delta applied to the Turn the request was given."""
        d = step.delta
        base = list(self._latest.blocks[: d.keep]) if self._latest is not None else []
        return Turn([*base, *d.blocks], d.id, TurnMetadata(d.metadata), TurnData(d.data))

    def _answered(self) -> RequestInput:
        answers = [self._answers[c.call_id] for c in self._calls]
        return RequestInput(self._spec(), str(workflow.uuid4()), self._latest, None, answers, self._context)

    async def _request(self, req: RequestInput) -> RequestOutput:
        spec = req.session
        out: RequestOutput = await workflow.execute_activity(
            _REQUEST,
            req,
            result_type=RequestOutput,
            start_to_close_timeout=timedelta(seconds=spec.request_timeout_s),
            heartbeat_timeout=timedelta(seconds=spec.heartbeat_s),
            retry_policy=_retries(spec),
        )
        return out

    async def _tool(self, call: CallInfo) -> Answer:
        spec = self._spec()
        block = next(b for b in _pending(self._latest) if str(b.payload.get("id", "")) == call.call_id)
        out = await workflow.execute_activity(
            _TOOL,
            ToolInput(spec.session_id, block, spec.heartbeat_s),
            result_type=ToolOutput,
            start_to_close_timeout=timedelta(seconds=spec.tool_timeout_s),
            heartbeat_timeout=timedelta(seconds=spec.heartbeat_s),
            retry_policy=_retries(spec),
        )
        return Answer(call.call_id, out.result, out.error)


def _retries(spec: SessionStart) -> RetryPolicy:
    return RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=spec.max_attempts,
    )


def _pending(turn: Turn | None) -> list[Any]:
    from ...tools import pending_tool_calls

    return [] if turn is None else pending_tool_calls(turn)
