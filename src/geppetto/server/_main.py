"""``python -m geppetto.server``: ``geppetto serve`` for an install with the ``server`` extra only.

The ``geppetto`` command needs the ``cli`` extra (typer, rich); the server does not, so this entry reads the
same flags with the standard library's argparse (and ``geppetto serve`` falls back to it when typer is
missing). Errors are one ``error:`` line: exit 2 for a usage error, 1 for any other geppetto error.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .._exceptions import ConfigurationError, GeppettoError, TurnFormatError, UsageError
from ..profiles import PROVIDERS
from ..runtime import EngineSettings, parse_options
from ._runner import SWEEP_INTERVAL
from ._serve import KEY_VARIABLE, ServeOptions, serve

__all__ = ["main", "parser"]

_LISTS = {"allowed_host": "GEPPETTO_SERVER_ALLOWED_HOSTS", "allowed_origin": "GEPPETTO_SERVER_ALLOWED_ORIGINS"}

# (flags, argparse settings): the flags of ``geppetto serve``, in its order.
_FLAGS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--profile", "-p"), {"help": "Profile name (`sim` runs offline)."}),
    (("--provider",), {"help": f"Provider: {', '.join(PROVIDERS)}."}),
    (("--model",), {"help": "Model name (overrides the profile's)."}),
    (("--base-url",), {"help": "Endpoint (overrides the profile's)."}),
    (("--mode",), {"help": "Responses mode: stateless, chained or conversation."}),
    (
        ("--option", "-o"),
        {
            "action": "append",
            "metavar": "KEY=VALUE",
            "help": "An engine option (a profile `options:` key); repeatable.",
        },
    ),
    (("--host",), {"default": "127.0.0.1", "help": "Address to listen on (loopback unless --api-key is set)."}),
    (("--port",), {"type": int, "default": 8000, "help": "Port to listen on."}),
    (("--store",), {"help": "Session store: a SQLite path or postgresql:// URL (default: the user's SQLite)."}),
    (("--bus",), {"help": "Event bus: memory:// (default), redis://HOST:6379/0, nats://HOST:4222."}),
    (("--workers",), {"type": int, "default": 1, "help": "Worker processes (more than 1 needs --bus redis or nats)."}),
    (("--api-key",), {"help": f"Bearer token clients must send (default: ${KEY_VARIABLE})."}),
    (("--with-tools",), {"action": "store_true", "help": "Offer the demo tools."}),
    (("--mcp",), {"action": "append", "help": "Offer the tools of an MCP server (command line or URL); repeatable."}),
    (("--sweep-interval",), {"type": float, "default": SWEEP_INTERVAL, "help": "Seconds between sweeps (0: never)."}),
    (("--log-level",), {"default": "warning", "help": "Least severe log records shown: debug, info, warning, error."}),
    (("--log-format",), {"default": "text", "help": "Log records on stderr as text, or json (one object a line)."}),
    (("--allowed-host",), {"action": "append", "metavar": "NAME", "help": "Another name clients reach it by."}),
    (("--max-body",), {"type": int, "metavar": "BYTES", "help": "The largest request body taken (16 MiB)."}),
    (("--limits",), {"metavar": "LIMITS", "help": "Usage limits, e.g. max_requests=20,max_cost=1.5."}),
    (("--allowed-origin",), {"action": "append", "metavar": "ORIGIN", "help": "Another site whose pages may call it."}),
]


def parser() -> argparse.ArgumentParser:
    """The flags of ``geppetto serve``."""
    found = argparse.ArgumentParser(
        prog="python -m geppetto.server",
        description="Serve sessions over HTTP: a REST API with resumable events, AG-UI and the Vercel AI SDK stream.",
    )
    for flags, settings in _FLAGS:
        found.add_argument(*flags, **settings)
    return found


def options_from(args: argparse.Namespace) -> ServeOptions:
    """The :class:`ServeOptions` the parsed flags describe (lists given by no flag come from their variable)."""
    if args.port < 0 or args.port > 65535 or args.workers < 1 or args.sweep_interval < 0:
        raise UsageError("--port must be 0 to 65535, --workers 1 or more and --sweep-interval 0 or more")
    lists = {name: getattr(args, name) or os.environ.get(variable, "").split() for name, variable in _LISTS.items()}
    engine_options = parse_options(args.option)
    settings = EngineSettings(args.profile, args.provider, args.model, args.base_url, args.mode, engine_options)
    options = ServeOptions(settings, args.host, args.port, args.store, args.bus, args.workers, args.with_tools)
    options.mcp, options.max_body, options.sweep_interval = list(args.mcp or ()), args.max_body, args.sweep_interval
    options.log_level, options.log_format = args.log_level.lower(), args.log_format.lower()
    options.allowed_hosts, options.allowed_origins = lists["allowed_host"], lists["allowed_origin"]
    options.limits = args.limits
    return options


def main(argv: list[str] | None = None) -> None:
    """Parse ``argv`` (the process's arguments by default) and serve until SIGINT/SIGTERM."""
    args = parser().parse_args(argv)
    try:
        serve(options_from(args), args.api_key or os.environ.get(KEY_VARIABLE) or None)
    except (ConfigurationError, UsageError, TurnFormatError) as exc:
        _fail(str(exc), 2)
    except GeppettoError as exc:
        _fail(str(exc), 1)
    except KeyboardInterrupt:
        _fail("interrupted", 130)


def _fail(message: str, code: int) -> None:
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    raise SystemExit(code)
