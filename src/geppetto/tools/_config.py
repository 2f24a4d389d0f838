"""Per-turn tool configuration (in ``Turn.data``) and the tools offered to the engine (in context).

The configuration is data and travels with the turn. The tools themselves are runtime objects, so
the tool loop puts their definitions in a contextvar for the engine underneath to read with
:func:`current_tools`, and marks the steps that follow tool results so that
:func:`request_tool_choice` relaxes a forced tool choice on them.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from ..turns import Turn, turn_data_key
from ._tool import ToolDefinition

__all__ = ["MCP_SERVER_KEYS", "TOOL_CONFIG", "ToolConfig", "current_tools", "offering_tools", "request_tool_choice"]

_CHOICES = ("auto", "none", "required")

MCP_SERVER_KEYS = ("command", "cwd", "env", "headers", "name", "prefix", "url")
"""The keys of an MCP server entry written as a mapping (a profile's ``mcp_servers:``, ``McpServer.from_spec``)."""


@dataclass
class ToolConfig:
    """How one turn may use tools.

    ``enabled``: the tool names offered (``None`` = every registered tool). ``tool_choice``: ``"auto"``,
    ``"none"``, ``"required"`` or the name of one tool; engines map it to their wire format. In a tool
    loop a forced choice (``"required"`` or a name) holds for the first model step only, and with
    ``"none"`` calls the model makes anyway are answered with an error instead of run (see
    :func:`~geppetto.middleware.tool_loop`). ``max_iterations``: overrides the tool loop's bound for
    this turn.
    """

    enabled: list[str] | None = None
    tool_choice: str = "auto"
    max_iterations: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.tool_choice, str) or not self.tool_choice:
            raise ValueError(f"tool_choice must be one of {', '.join(_CHOICES)} or a tool name")
        if self.max_iterations is not None and self.max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tool_choice": self.tool_choice}
        if self.enabled is not None:
            out["enabled"] = list(self.enabled)
        if self.max_iterations is not None:
            out["max_iterations"] = self.max_iterations
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolConfig:
        enabled = data.get("enabled")
        return cls(
            enabled=[str(n) for n in enabled] if enabled is not None else None,
            tool_choice=str(data.get("tool_choice", "auto")),
            max_iterations=int(data["max_iterations"]) if data.get("max_iterations") is not None else None,
        )


TOOL_CONFIG = turn_data_key("geppetto", "tool_config", 1, ToolConfig)
"""``geppetto.tool_config@v1``: the :class:`ToolConfig` of a turn."""

_OFFERED: contextvars.ContextVar[tuple[ToolDefinition, ...]] = contextvars.ContextVar("geppetto_tools", default=())
_FOLLOW_UP: contextvars.ContextVar[bool] = contextvars.ContextVar("geppetto_tools_follow_up", default=False)


def current_tools() -> tuple[ToolDefinition, ...]:
    """The tool definitions the engine should offer the model now (empty outside a tool loop)."""
    return _OFFERED.get()


@contextlib.contextmanager
def offering_tools(definitions: Sequence[ToolDefinition], *, follow_up: bool = False) -> Iterator[None]:
    """Make ``definitions`` the tools offered to engines called inside the block. ``follow_up`` marks
    a model step that answers tool results, where :func:`request_tool_choice` relaxes a forced choice."""
    token = _OFFERED.set(tuple(definitions))
    follow_token = _FOLLOW_UP.set(follow_up)
    try:
        yield
    finally:
        _FOLLOW_UP.reset(follow_token)
        _OFFERED.reset(token)


@overload
def request_tool_choice(engine_choice: str | None, turn: Turn) -> str | None: ...
@overload
def request_tool_choice(engine_choice: dict[str, Any], turn: Turn) -> str | dict[str, Any]: ...


def request_tool_choice(engine_choice: str | dict[str, Any] | None, turn: Turn) -> str | dict[str, Any] | None:
    """The tool choice an engine should send now: its own ``engine_choice``, else the turn's
    :class:`ToolConfig` choice (``None`` for ``"auto"``: the provider's default).

    On a step of a tool loop that follows tool results, a forced choice (``"required"``, a tool name
    or a provider's dict form) becomes ``"auto"``: a model that obeys it would otherwise call tools on
    every step and the loop could only end at its iteration bound. ``"none"`` stays ``"none"``.
    """
    choice = engine_choice
    if choice is None:
        config = TOOL_CONFIG.get(turn.data)
        if config is not None and config.tool_choice != "auto":
            choice = config.tool_choice
    if _FOLLOW_UP.get() and choice not in (None, "auto", "none"):
        return "auto"
    return choice
