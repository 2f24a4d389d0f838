"""Tools: ``@tool`` on a typed function, a registry by name, and an executor that turns every outcome
(result, exception, timeout, bad arguments, unknown tool) into a ``tool_use`` block the model sees."""

from ._approval import (
    APPROVAL,
    ApprovalPendingError,
    ApprovalPolicy,
    PendingCall,
    approval_policy,
    awaiting,
    client_tool,
)
from ._config import TOOL_CONFIG, ToolConfig, current_tools, offering_tools, request_tool_choice
from ._context import ToolContext, TurnView
from ._executor import (
    DEFAULT_MAX_RESULT_CHARS,
    OnError,
    ToolCallError,
    execute_tool_calls,
    pending_tool_calls,
    refuse_tool_calls,
)
from ._registry import ToolRegistry
from ._tool import Tool, ToolDefinition, ToolReportedError, serialize_result, tool

__all__ = [
    "APPROVAL",
    "DEFAULT_MAX_RESULT_CHARS",
    "TOOL_CONFIG",
    "ApprovalPendingError",
    "ApprovalPolicy",
    "OnError",
    "PendingCall",
    "Tool",
    "ToolCallError",
    "ToolConfig",
    "ToolContext",
    "ToolDefinition",
    "ToolRegistry",
    "ToolReportedError",
    "TurnView",
    "approval_policy",
    "awaiting",
    "client_tool",
    "current_tools",
    "execute_tool_calls",
    "offering_tools",
    "pending_tool_calls",
    "refuse_tool_calls",
    "request_tool_choice",
    "serialize_result",
    "tool",
]
