"""The options several commands share (``--profile``, ``--provider``, ``--model``, ...), as typer types."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..profiles import PROVIDERS

__all__ = [
    "AttachOpt",
    "BaseUrlOpt",
    "LimitsOpt",
    "McpOpt",
    "ModeOpt",
    "ModelOpt",
    "OptionOpt",
    "ProfileOpt",
    "ProviderOpt",
    "UsageOpt",
    "VerboseOpt",
]

ProfileOpt = Annotated[str | None, typer.Option("--profile", "-p", help="Profile name (`sim` runs offline).")]
ProviderOpt = Annotated[str | None, typer.Option(help=f"Provider: {', '.join(PROVIDERS)}.")]
ModelOpt = Annotated[str | None, typer.Option(help="Model name (overrides the profile's).")]
BaseUrlOpt = Annotated[str | None, typer.Option("--base-url", help="Endpoint (overrides the profile's).")]
ModeOpt = Annotated[str | None, typer.Option(help="Responses mode: stateless, chained or conversation.")]
OptionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--option",
        "-o",
        metavar="KEY=VALUE",
        help="An engine option (any profile `options:` key, e.g. compact_threshold=200000, prefix_policy=error); "
        "the value is JSON where it parses, else a string; repeatable; over the profile's.",
    ),
]
AttachOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--attach",
        "-a",
        metavar="FILE",
        help="Attach a file (image, PDF, text, audio) to the (first) prompt; repeatable.",
    ),
]
UsageOpt = Annotated[
    bool, typer.Option("--usage", help="Print tokens (cached, written, reasoning) and cost after each answer.")
]
LimitsOpt = Annotated[
    str | None,
    typer.Option(
        "--limits",
        metavar="LIMITS",
        help="Usage limits, e.g. max_requests=20,max_cost=1.5 (also max_tool_calls, max_input_tokens, "
        "max_output_tokens, max_total_tokens, allow_unpriced=true); default: the profile's `limits`.",
    ),
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", "-v", help="Log what geppetto decides (requests, anchors, fallbacks) to stderr.")
]
McpOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--mcp",
        help="Offer the tools of an MCP server: a command line (run over stdio) or an http(s) URL; repeatable.",
    ),
]
