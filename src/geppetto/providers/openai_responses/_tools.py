"""Tools and reasoning settings of a Responses request.

The engine offers its own ``tools=`` plus the tools a tool loop offers in context
(:func:`geppetto.tools.current_tools`), like every geppetto engine; the turn's
:class:`~geppetto.tools.ToolConfig` choice applies when the engine has none. Function tools go out as
``{"type": "function", "name", "description", "parameters", "strict"}``; hosted tools (any dict whose
``type`` is not ``function``, e.g. ``{"type": "web_search"}``) pass through verbatim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from geppetto._exceptions import UsageError
from geppetto.providers._streaming import ToolSpec, normalize_tools, request_tools
from geppetto.tools import Tool
from geppetto.turns import Turn

__all__ = ["EFFORTS", "SUMMARIES", "EngineTools"]

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
"""``reasoning.effort`` values the API takes (models support subsets)."""
SUMMARIES = ("auto", "concise", "detailed")
_MODES = ("auto", "none", "required")


def _definition(tool: Any) -> Any:
    """What a tool argument describes: a dict, or an object with ``name``/``description``/``parameters``."""
    if isinstance(tool, Tool):
        return tool.definition
    if isinstance(tool, dict):
        inner = tool.get("function")
        return {**inner, "type": "function"} if tool.get("type") == "function" and isinstance(inner, dict) else tool
    if not hasattr(tool, "name") and callable(tool):
        return Tool(tool).definition  # a plain typed function, as Session(tools=[fn]) takes it
    if not (hasattr(tool, "name") and hasattr(tool, "parameters")):
        raise UsageError(
            f"tool {tool!r} is not a tool: pass @geppetto.tool functions, ToolDefinition objects, or dicts "
            "{'name', 'description', 'parameters'} (hosted tools as {'type': 'web_search', ...})"
        )
    return tool


class EngineTools:
    """The tools given to the engine: function tool specs (with their ``strict`` flags) and hosted tools."""

    def __init__(self, tools: Sequence[Any] | None) -> None:
        self.specs: list[ToolSpec] = []
        self.strict: dict[str, bool] = {}
        self.hosted: list[dict[str, Any]] = []
        for raw in tools or ():
            tool = _definition(raw)
            if isinstance(tool, dict) and tool.get("type", "function") != "function":
                self.hosted.append(dict(tool))
                continue
            (spec,) = normalize_tools([tool])
            if spec.name in self.strict:
                raise UsageError(f"tool {spec.name!r} is given twice; tool names must be unique")
            get = tool.get if isinstance(tool, dict) else lambda k, d=None, t=tool: getattr(t, k, d)
            self.strict[spec.name] = bool(get("strict", False))
            self.specs.append(spec)

    def __bool__(self) -> bool:
        return bool(self.specs or self.hosted)

    def fields(self, turn: Turn, tool_choice: str | dict[str, Any] | None) -> dict[str, Any]:
        """``tools`` and ``tool_choice`` for one request on ``turn`` (inside a tool loop, with its tools).

        ``tool_choice``: ``"auto"``, ``"none"``, ``"required"``, a tool name (sent as
        ``{"type": "function", "name": ...}``) or a Responses ``tool_choice`` dict (sent as is); None
        takes the turn's ``ToolConfig`` choice."""
        choice_text = tool_choice if isinstance(tool_choice, str) else None
        specs, choice = request_tools(self.specs, choice_text, turn)
        tools: list[dict[str, Any]] = [self._function(spec) for spec in specs] + self.hosted
        if not tools:
            return {}
        out: dict[str, Any] = {"tools": tools}
        if isinstance(tool_choice, dict):
            out["tool_choice"] = tool_choice
        elif choice is None and self.hosted and choice_text in _MODES:
            out["tool_choice"] = choice_text
        elif choice is not None:
            out["tool_choice"] = choice if choice in _MODES else {"type": "function", "name": choice}
        return out

    def _function(self, spec: ToolSpec) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "function", "name": spec.name}
        if spec.description:
            out["description"] = spec.description
        out["parameters"] = spec.parameters
        out["strict"] = self.strict.get(spec.name, False)
        return out

    def definitions(self) -> list[dict[str, Any]]:
        """The engine's own tools as they go out on the wire (without the tools a loop offers)."""
        return [self._function(spec) for spec in self.specs] + self.hosted
