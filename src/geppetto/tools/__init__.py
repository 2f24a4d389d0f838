"""Tools: ``@tool`` on a typed function, a registry by name, and an executor that turns every outcome
(result, exception, timeout, bad arguments, unknown tool) into a ``tool_use`` block the model sees.

The names imported as ``name as name`` and left out of ``__all__`` are geppetto's own internal API: the
approval states, the journal of side effects and the deps contextvar that the tool loop, the session and the
server share. They are not part of the public API (not in ``__all__``, not documented) and may change in any
release.
"""

from ._approval import (
    APPROVAL,
    ApprovalPendingError,
    ApprovalPolicy,
    PendingCall,
    approval_policy,
    awaiting,
    client_tool,
)
from ._approval import Require as Require
from ._approval import apply_decisions as apply_decisions
from ._approval import decided as decided
from ._approval import drop_calls as drop_calls
from ._approval import has_unrun_decisions as has_unrun_decisions
from ._approval import mark_waiting as mark_waiting
from ._approval import needs_person as needs_person
from ._approval import refusal_for as refusal_for
from ._approval import registry_require as registry_require
from ._config import MCP_SERVER_KEYS as MCP_SERVER_KEYS
from ._config import TOOL_CONFIG, ToolConfig, current_tools, offering_tools, request_tool_choice
from ._context import ToolContext, TurnView
from ._context import using_deps as using_deps
from ._executor import (
    DEFAULT_MAX_RESULT_CHARS,
    OnError,
    ToolCallError,
    execute_tool_calls,
    pending_tool_calls,
    refuse_tool_calls,
)
from ._executor import require_tool_results as require_tool_results
from ._journal import INTERRUPTED_ERROR as INTERRUPTED_ERROR
from ._journal import JOURNAL as JOURNAL
from ._journal import MARKS_PUBLISHED as MARKS_PUBLISHED
from ._journal import JournalRecord as JournalRecord
from ._journal import JournalStore as JournalStore
from ._journal import RunJournal as RunJournal
from ._journal import base_key as base_key
from ._journal import interrupted_policy as interrupted_policy
from ._journal import published_entry as published_entry
from ._journal import rebuild as rebuild
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
