"""The tool loop: run the model, execute the tool calls it asked for, run it again, until it stops asking."""

from __future__ import annotations

from .._exceptions import MaxIterationsError
from ..engine import Handler
from ..events import metadata_for
from ..tools import (
    TOOL_CONFIG,
    OnError,
    ToolConfig,
    ToolRegistry,
    execute_tool_calls,
    offering_tools,
    pending_tool_calls,
)
from ..turns import PAYLOAD_NAME, Turn
from ._chain import Middleware

__all__ = ["tool_loop"]


def tool_loop(
    registry: ToolRegistry,
    max_iterations: int = 10,
    timeout_s: float = 30.0,
    max_parallel: int = 4,
    on_error: OnError = "continue",
) -> Middleware:
    """Execute the tool calls the model makes, feeding the results back until it makes none.

    After each model step, every ``tool_call`` without a ``tool_use`` of the same id is executed
    (``max_parallel`` at a time, each under ``timeout_s``), one ``tool_use`` per call is appended in
    call order, and the model runs again. The loop ends when nothing is pending. It raises
    :class:`~geppetto.MaxIterationsError` only when ``max_iterations`` model steps have run and the
    last one still asked for tools; those calls are not executed (the model could not see the results)
    and ``error.turn`` holds them, pending.

    A turn's :class:`~geppetto.tools.ToolConfig` (``TOOL_CONFIG`` in ``turn.data``) narrows the tools
    offered and may override ``max_iterations``. Engines below read the offered definitions with
    :func:`geppetto.tools.current_tools`. ``on_error`` is passed to
    :func:`~geppetto.tools.execute_tool_calls`.
    """
    if max_iterations < 1:
        raise ValueError("max_iterations must be at least 1")

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            config = TOOL_CONFIG.get(turn.data) or ToolConfig()
            limit = config.max_iterations or max_iterations
            active = registry.subset(config.enabled)
            offered = [] if config.tool_choice == "none" else active.list()
            with offering_tools(offered):
                for step in range(1, limit + 1):
                    turn = await next_handler(turn)
                    pending = pending_tool_calls(turn)
                    if not pending:
                        return turn
                    if step == limit:
                        break
                    results = await execute_tool_calls(
                        active,
                        pending,
                        timeout_s=timeout_s,
                        max_parallel=max_parallel,
                        on_error=on_error,
                        metadata=metadata_for(turn),
                    )
                    turn.extend(results)
            names = ", ".join(sorted({str(b.payload.get(PAYLOAD_NAME, "")) for b in pending}))
            raise MaxIterationsError(
                f"the tool loop ran the model {limit} times and it still asks for tools ({names}); the "
                "pending calls were not executed. Raise max_iterations in tool_loop(...) or set "
                "ToolConfig(max_iterations=...) under TOOL_CONFIG in turn.data",
                turn=turn,
            )

        return handler

    return middleware
