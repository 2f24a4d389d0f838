"""The tools a server session offers: the server's own registry (followed live, e.g. as MCP servers change
their tool lists) plus the client-side tools a front-end declared for its runs (AG-UI's ``tools``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..tools import Tool, ToolDefinition, ToolRegistry, client_tool

__all__ = ["SessionTools"]


class SessionTools(ToolRegistry):
    """A registry over ``base`` (read through, never copied) and this session's client-side tools.

    :meth:`declare` replaces the client-side tools (a front-end sends its list with every run); a server
    tool of the same name wins, so a client cannot shadow what the server runs."""

    def __init__(self, base: ToolRegistry | None) -> None:  # not ToolRegistry.__init__: nothing is copied
        self.base = base
        self.approval = base.approval if base is not None else None
        self.client: dict[str, Tool] = {}

    @property
    def _tools(self) -> dict[str, Tool]:  # type: ignore[override]
        own = self.base._tools if self.base is not None else {}
        return {**self.client, **own}

    def add(self, fn: Any, *, replace: bool = False) -> Tool:
        raise TypeError(
            "a session's tools are the server's plus the client's: add server tools to the server's registry"
        )

    def declare(self, definitions: Iterable[ToolDefinition]) -> None:
        """Make ``definitions`` the client-side tools of the next runs."""
        self.client = {
            d.name: client_tool(name=d.name, description=d.description, parameters=d.parameters) for d in definitions
        }
