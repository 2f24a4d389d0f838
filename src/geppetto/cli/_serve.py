"""``geppetto simulate`` and ``geppetto serve``: the simulator and the server in the foreground."""

from __future__ import annotations

import errno
import signal
import sys
import time
from typing import Annotated

import typer

from ..runtime import EngineSettings, parse_options, port_in_use
from ._guard import fail, guarded
from ._options import BaseUrlOpt, LimitsOpt, McpOpt, ModelOpt, ModeOpt, OptionOpt, ProfileOpt, ProviderOpt
from ._sessions import StoreOpt

__all__ = ["serve", "simulate"]


HostOpt = Annotated[str, typer.Option(help="Address to listen on (loopback unless --api-key is set).")]
PortOpt = Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")]
BusOpt = Annotated[
    str | None, typer.Option("--bus", help="Event bus: memory:// (default), redis://HOST:6379/0, nats://HOST:4222.")
]
WorkersOpt = Annotated[int, typer.Option(min=1, help="Worker processes (more than 1 needs --bus redis or nats).")]
ApiKeyOpt = Annotated[
    str | None,
    typer.Option("--api-key", envvar="GEPPETTO_SERVER_KEY", help="Bearer token clients must send."),
]
WithToolsOpt = Annotated[bool, typer.Option("--with-tools", help="Offer the demo tools.")]
SweepIntervalOpt = Annotated[
    float,
    typer.Option(
        min=0,
        help="Seconds between sweeps that settle inferences of a worker that is gone and stop those whose "
        "lease this worker lost (0: never).",
    ),
]
LogLevelOpt = Annotated[
    str, typer.Option("--log-level", help="Least severe log records shown: debug, info, warning, error.")
]
LogFormatOpt = Annotated[
    str, typer.Option("--log-format", help="Log records on stderr as text, or json (one object a line).")
]
AllowedHostOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allowed-host",
        metavar="NAME",
        envvar="GEPPETTO_SERVER_ALLOWED_HOSTS",
        help="A name clients reach the server by (Host header), besides --host and the loopback names; "
        "repeatable, '*' for any.",
    ),
]
MaxBodyOpt = Annotated[
    int | None,
    typer.Option(
        "--max-body",
        min=1,
        metavar="BYTES",
        help="The largest request body taken (16 MiB by default); attached files count, base64-encoded.",
    ),
]
AllowedOriginOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allowed-origin",
        metavar="ORIGIN",
        envvar="GEPPETTO_SERVER_ALLOWED_ORIGINS",
        help="Another site whose pages may call the server (https://app.example; CORS for it); repeatable.",
    ),
]


QuirksOpt = Annotated[
    str | None,
    typer.Option(
        "--quirks",
        metavar="NAME[,NAME...]",
        help="Behave like a third-party Responses server: no-echo, null-echo, foreign-echo, forgets, "
        "detail-errors, untyped-stream-errors, no-conversations, no-usage, no-item-events, done-marker "
        "(see docs/simulator.md).",
    ),
]


def simulate(
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on (0 picks a free one).")] = 8765,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    quirks: QuirksOpt = None,
) -> None:
    """Run the provider simulator in the foreground until Ctrl-C."""
    from ..simulator import QuirkError, parse_quirks, serve

    try:
        chosen = parse_quirks(quirks)
    except QuirkError as exc:
        fail(f"--quirks: {exc}")

    def stop(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM ends it as cleanly as Ctrl-C

    signal.signal(signal.SIGTERM, stop)
    try:
        with serve(host, port, quirks=chosen) as sim:
            print(f"geppetto simulator on {sim.url}", flush=True)
            if chosen:
                print(f"  quirks: {', '.join(sorted(chosen))}", flush=True)
            print(f"  OpenAI base URL:            {sim.openai_url}", flush=True)
            print(f"  Anthropic/Gemini base URL:  {sim.url}", flush=True)
            print("  any API key works; Ctrl-C stops it", flush=True)
            while True:
                time.sleep(3600)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            fail(port_in_use(host, port))
        fail(f"cannot listen on {host}:{port}: {exc.strerror}")
    except KeyboardInterrupt:
        print("simulator stopped", file=sys.stderr)


def serve(
    profile: ProfileOpt = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    mode: ModeOpt = None,
    option: OptionOpt = None,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = 8000,
    store: StoreOpt = None,
    bus: BusOpt = None,
    workers: WorkersOpt = 1,
    api_key: ApiKeyOpt = None,
    with_tools: WithToolsOpt = False,
    mcp: McpOpt = None,
    sweep_interval: SweepIntervalOpt = 10.0,
    log_level: LogLevelOpt = "warning",
    log_format: LogFormatOpt = "text",
    allowed_host: AllowedHostOpt = None,
    max_body: MaxBodyOpt = None,
    limits: LimitsOpt = None,
    allowed_origin: AllowedOriginOpt = None,
    temporal: Annotated[
        str | None,
        typer.Option(
            "--temporal",
            metavar="HOST:PORT",
            help="Run every session's prompts as durable sessions on this Temporal service (docs/durable.md).",
        ),
    ] = None,
    task_queue: Annotated[
        str, typer.Option("--task-queue", help="The Temporal task queue of the durable sessions.")
    ] = "geppetto",
) -> None:
    """Serve sessions over HTTP: a REST API with resumable events, AG-UI and the Vercel AI SDK stream."""
    try:
        from ..server import ServeOptions
        from ..server import serve as run_server
    except ImportError as exc:
        fail(str(exc))
    settings = EngineSettings(profile, provider, model, base_url, mode, guarded(lambda: parse_options(option)))
    options = ServeOptions(
        settings,
        host,
        port,
        store,
        bus,
        workers,
        with_tools,
        list(mcp or ()),
        max_body=max_body,
        sweep_interval=sweep_interval,
        log_level=log_level.lower(),
        log_format=log_format.lower(),
    )
    options.allowed_hosts, options.allowed_origins = list(allowed_host or ()), list(allowed_origin or ())
    options.limits = limits
    options.temporal, options.task_queue = temporal, task_queue
    guarded(lambda: run_server(options, api_key))
