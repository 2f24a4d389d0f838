"""Middleware: functions from the next handler to a new handler, composed with :func:`with_middleware`."""

from ._builtin import logging_middleware, reorder_blocks, reorder_tool_results, system_prompt
from ._chain import Middleware, MiddlewareEngine, new_blocks_not_in, snapshot_block_ids, with_middleware
from ._output import structured_output
from ._tool_loop import tool_loop

__all__ = [
    "Middleware",
    "MiddlewareEngine",
    "logging_middleware",
    "new_blocks_not_in",
    "reorder_blocks",
    "reorder_tool_results",
    "snapshot_block_ids",
    "structured_output",
    "system_prompt",
    "tool_loop",
    "with_middleware",
]
