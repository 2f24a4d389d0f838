"""Anthropic Messages API: ``ClaudeEngine`` (endpoint), ``build_request`` and ``ClaudeStreamReducer`` (dialect)."""

from . import _server_tools as server_tools
from ._blocks import PROVIDER
from ._dialect import ANTHROPIC_VERSION, build_messages, build_request, wire_tool_id
from ._engine import DEFAULT_BASE_URL, ClaudeEngine
from ._stream import ClaudeStreamReducer, claude_stop_reason, claude_usage

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_BASE_URL",
    "PROVIDER",
    "ClaudeEngine",
    "ClaudeStreamReducer",
    "build_messages",
    "build_request",
    "claude_stop_reason",
    "claude_usage",
    "server_tools",
    "wire_tool_id",
]
