"""ToolRegistry: the tools an inference may call, by name."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .._exceptions import UsageError
from ._tool import Tool, ToolDefinition

__all__ = ["ToolRegistry"]


class ToolRegistry:
    """Tools by name, in the order they were added.

    Build it from tools or plain typed functions: ``ToolRegistry([get_weather, add])`` (functions are
    wrapped with :func:`~geppetto.tools.tool`). Adding a second tool under a taken name is an error
    unless ``replace=True``.

    ``approval``: an approval rule for the calls of these tools (``True``/``False`` for all, or a
    predicate ``(tool_name, arguments) -> bool``), which wins over each tool's ``requires_approval``;
    a session's own :class:`~geppetto.tools.ApprovalPolicy` wins over it.
    """

    def __init__(
        self,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        *,
        approval: bool | Callable[[str, dict[str, Any]], bool] | None = None,
    ) -> None:
        if approval is not None and not isinstance(approval, bool) and not callable(approval):
            raise UsageError(
                f"ToolRegistry(approval=...) takes True, False, None or a predicate (name, args) -> bool, not {approval!r}"
            )
        self.approval = approval
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, fn: Tool | Callable[..., Any], *, replace: bool = False) -> Tool:
        """Register a tool (or a typed function, wrapped with ``@tool``) and return it."""
        t = fn if isinstance(fn, Tool) else Tool(fn)
        if t.name in self._tools and not replace:
            raise UsageError(
                f"a tool named {t.name!r} is already registered; remove it first, pass replace=True, "
                "or give the new one another name with @tool(name=...)"
            )
        self._tools[t.name] = t
        return t

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return self._tools.get(name)

    def remove(self, name: str) -> None:
        """Unregister ``name``; :class:`KeyError` when there is no such tool."""
        if name not in self._tools:
            raise KeyError(f"no tool named {name!r}; registered: {', '.join(self._tools) or '(none)'}")
        del self._tools[name]

    def list(self) -> builtins.list[ToolDefinition]:
        """The definitions of every tool, in registration order."""
        return [t.definition for t in self._tools.values()]

    def names(self) -> builtins.list[str]:
        return list(self._tools)

    def merge(self, other: ToolRegistry) -> ToolRegistry:
        """A new registry with this registry's tools and ``other``'s; ``other`` wins on a name clash."""
        merged = ToolRegistry(self._tools.values(), approval=self.approval)
        for t in other:
            merged.add(t, replace=True)
        return merged

    def subset(self, names: Iterable[str] | None) -> ToolRegistry:
        """A registry with only the tools named (all of them when ``names`` is ``None``); unknown
        names are ignored, since a turn's tool config may outlive a tool."""
        if names is None:
            return ToolRegistry(self._tools.values(), approval=self.approval)
        wanted = set(names)
        return ToolRegistry((t for n, t in self._tools.items() if n in wanted), approval=self.approval)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    def __repr__(self) -> str:
        return f"ToolRegistry({list(self._tools)})"
