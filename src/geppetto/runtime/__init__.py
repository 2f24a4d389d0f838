"""From a profile to an engine with its tools: the layer below both the ``geppetto`` command and the server.

It chooses the profile (:func:`choose_profile` from :class:`EngineSettings`), opens its engine and the
simulator a simulator profile needs (:func:`open_engine`), adds the tools of MCP servers (:func:`mcp_tools`),
and holds the offline demo tools (:func:`demo_registry`). It needs none of the command's packages (typer,
rich), so ``geppetto[server]`` runs without them.
"""

from __future__ import annotations

from ._demo_tools import book_table, calculator, demo_registry, echo, get_weather
from ._engines import (
    CHAT_ENGINE,
    FALLBACK_MODEL,
    SIM_API_KEY,
    EngineSettings,
    McpHold,
    Opened,
    choose_profile,
    engine_record,
    mcp_tools,
    open_engine,
    parse_options,
    recording_engine,
)
from ._model_string import MODEL_PREFIXES, engine_for
from ._ports import port_in_use

__all__ = [
    "CHAT_ENGINE",
    "FALLBACK_MODEL",
    "MODEL_PREFIXES",
    "SIM_API_KEY",
    "EngineSettings",
    "McpHold",
    "Opened",
    "book_table",
    "calculator",
    "choose_profile",
    "demo_registry",
    "echo",
    "engine_for",
    "engine_record",
    "get_weather",
    "mcp_tools",
    "open_engine",
    "parse_options",
    "port_in_use",
    "recording_engine",
]
