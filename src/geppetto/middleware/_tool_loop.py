"""The tool loop: run the model, execute the tool calls it asked for, run it again, until it stops asking."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass

from .._exceptions import MaxIterationsError, ProviderError
from ..engine import Handler
from ..events import metadata_for
from ..tools import (
    APPROVAL,
    DEFAULT_MAX_RESULT_CHARS,
    JOURNAL,
    TOOL_CONFIG,
    ApprovalPolicy,
    OnError,
    Require,
    ToolConfig,
    ToolRegistry,
    approval_policy,
    execute_tool_calls,
    has_unrun_decisions,
    offering_tools,
    pending_tool_calls,
    refuse_tool_calls,
)
from ..turns import PAYLOAD_ID, PAYLOAD_NAME, Block, BlockKind, Turn
from ._approvals import Execute, answer_decided, hold_for_people, still_waiting
from ._chain import Middleware

__all__ = ["tool_loop"]

_DISABLED = "tools are disabled for this turn (tool_choice is 'none'); the call was not run, answer without tools"


def tool_loop(
    registry: ToolRegistry,
    max_iterations: int = 10,
    timeout_s: float = 30.0,
    max_parallel: int = 4,
    on_error: OnError = "continue",
    max_result_chars: int | None = DEFAULT_MAX_RESULT_CHARS,
    approval: ApprovalPolicy | Require | None = None,
) -> Middleware:
    """Execute the tool calls the model makes, feeding the results back until it makes none.

    After each model step, every pending ``tool_call`` is executed (``max_parallel`` at a time, each
    under ``timeout_s``), one ``tool_use`` per call is appended in call order, and the model runs
    again. The loop ends when nothing is pending. It raises :class:`~geppetto.MaxIterationsError` only
    when ``max_iterations`` model steps have run and the last one still asked for tools; those calls are
    not executed (the model could not see the results) and ``error.turn`` holds them, pending.

    A call is pending until a later ``tool_use`` with its id answers it; each ``tool_use`` answers one
    call (see :func:`~geppetto.tools.pending_tool_calls`). Before it runs, a pending call whose id is
    empty or already used by an earlier ``tool_call`` of the turn (some compatible servers send
    ``call_0`` on every step) gets a fresh unique id, so every engine can replay the turn and match
    each result to its call.

    A turn's :class:`~geppetto.tools.ToolConfig` (``TOOL_CONFIG`` in ``turn.data``) narrows the tools
    offered and may override ``max_iterations``. Engines below read the offered definitions with
    :func:`geppetto.tools.current_tools` and the tool choice with
    :func:`geppetto.tools.request_tool_choice`. A forced choice (``"required"`` or a tool name, the
    turn's or the engine's) holds for the first step only; the steps that follow tool results ask with
    ``"auto"``, as agent frameworks do, else a model obeying it could never answer. With ``"none"`` no
    tools are offered, and calls the model makes anyway are not run: each gets a ``tool_use`` error
    saying tools are disabled, so the turn stays valid.

    Events: the engine publishes ``tool_call`` (requested) as calls arrive; the loop does not repeat
    it. Tools publish ``tool_call_started`` when they start and ``tool_result`` for every call (see
    :func:`~geppetto.tools.execute_tool_calls`). ``on_error`` and ``max_result_chars`` (the longest tool
    result sent to the model; longer ones are cut with a line saying so) are passed to ``execute_tool_calls``.

    Calls that wait for a person end the loop: a call of a tool that requires approval (``approval``, an
    :class:`~geppetto.tools.ApprovalPolicy` or its ``require`` rule, else the registry's ``approval``,
    else the tool's ``requires_approval``) or of a client-side tool is marked waiting (``APPROVAL`` in its
    metadata), the other calls of that step run, an ``approval_requested`` event lists what waits, and the
    turn is returned with those calls unanswered. When the loop is given a turn whose waiting calls were
    decided (``Session.resume``), it first runs the approved ones and answers the others (a refusal with
    the reason, or the client's result), then goes on with the model once nothing waits.

    When a model step fails after tools have run (a provider error, say a 413 for a request grown too
    large), the error's ``turn`` holds the conversation as it stood, tool results included, so nothing
    the tools did is lost.
    """
    if max_iterations < 1:
        raise ValueError("max_iterations must be at least 1")
    execute = _executor(timeout_s, max_parallel, on_error, max_result_chars)
    return _Steps(registry, max_iterations, execute, approval_policy(approval)).middleware


def _executor(timeout_s: float, max_parallel: int, on_error: OnError, max_result_chars: int | None) -> Execute:
    return functools.partial(
        execute_tool_calls,
        timeout_s=timeout_s,
        max_parallel=max_parallel,
        on_error=on_error,
        max_result_chars=max_result_chars,
    )


@dataclass(frozen=True)
class _Steps:
    """One tool loop's settings: the registry, the step limit, how calls are executed and who approves them."""

    registry: ToolRegistry
    max_iterations: int
    execute: Execute
    policy: ApprovalPolicy

    def middleware(self, next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            return await self.run(turn, next_handler)

        return handler

    async def run(self, turn: Turn, next_handler: Handler) -> Turn:
        """Model steps and tool calls until nothing is pending, a call waits for a person, or the limit."""
        config = TOOL_CONFIG.get(turn.data) or ToolConfig()
        limit = config.max_iterations or self.max_iterations
        active = self.registry.subset(config.enabled)
        disabled = config.tool_choice == "none"
        offered = [] if disabled else active.list()
        journal = JOURNAL.get()
        resumed = False
        # a Turn with no call left open (a new prompt's) has nothing decided or waiting: one scan, not two
        if pending_tool_calls(turn):
            if journal is not None and has_unrun_decisions(turn):
                await journal.checkpoint(turn)  # before the approved calls run
            resumed = await answer_decided(turn, active, self.execute)
            if journal is not None and journal.resumed and not disabled:
                # a Turn rebuilt from the journal ends with the calls of the step that was cut off
                left = [b for b in pending_tool_calls(turn) if APPROVAL.get(b.metadata) is None]
                if left:
                    resumed = True
                    if await self._run_calls(turn, active, left, checkpoint=False):
                        return turn
            if still_waiting(turn):
                return turn  # some calls still wait for a decision: the model cannot go on yet
        for step in range(1, limit + 1):
            with offering_tools(offered, follow_up=step > 1 or resumed):
                turn = await _model_step(turn, next_handler, step)
            pending = pending_tool_calls(turn)
            if not pending:
                return turn
            if step == limit:
                break
            _give_unique_ids(turn, pending)
            if disabled:
                turn.extend(refuse_tool_calls(pending, _DISABLED, metadata=metadata_for(turn)))
            elif await self._run_calls(turn, active, pending):
                return turn
        names = ", ".join(sorted({str(b.payload.get(PAYLOAD_NAME, "")) for b in pending}))
        raise MaxIterationsError(
            f"the tool loop ran the model {limit} times and it still asks for tools ({names}); the "
            "pending calls were not executed. Raise max_iterations in tool_loop(...) or set "
            "ToolConfig(max_iterations=...) under TOOL_CONFIG in turn.data",
            turn=turn,
        )

    async def _run_calls(
        self, turn: Turn, active: ToolRegistry, pending: list[Block], *, checkpoint: bool = True
    ) -> bool:
        """Run the calls that need no person; True when some wait for one (the loop then ends)."""
        journal = JOURNAL.get()
        if journal is not None and checkpoint:
            await journal.checkpoint(turn)  # before any tool of the step runs
        run_now, held = hold_for_people(turn, active, pending, self.policy, journal)
        if run_now:
            turn.extend(await self.execute(active, run_now, metadata=metadata_for(turn), turn=turn))
        return bool(held)


async def _model_step(turn: Turn, next_handler: Handler, step: int) -> Turn:
    try:
        return await next_handler(turn)
    except ProviderError as exc:
        if step > 1 and exc.turn is None:
            exc.turn = turn  # the tool results this loop added are kept
        raise


def _give_unique_ids(turn: Turn, pending: Sequence[Block]) -> None:
    """Give each pending call whose id is empty or taken by an earlier tool_call a fresh id."""
    waiting = {id(b) for b in pending}
    seen: set[str] = set()
    for block in turn.blocks:
        if block.kind is not BlockKind.TOOL_CALL:
            continue
        call_id = str(block.payload.get(PAYLOAD_ID, ""))
        if id(block) in waiting and (not call_id or call_id in seen):
            call_id = f"call_{os.urandom(12).hex()}"
            block.payload[PAYLOAD_ID] = call_id
        seen.add(call_id)
