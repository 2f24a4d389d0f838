"""``geppetto serve``: the app under uvicorn, one worker or many (each worker builds the app from the same
settings, passed in an environment variable)."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import json
import os
import socket
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .._exceptions import UsageError
from .._redact import redact_url
from ..runtime import EngineSettings, choose_profile, port_in_use
from ..session import UsageLimits
from ._logging import LOG_FORMATS, LOG_LEVELS, configure_logging
from ._runner import SWEEP_INTERVAL

__all__ = ["CONFIG_VARIABLE", "ServeOptions", "app_from_env", "serve"]

CONFIG_VARIABLE = "GEPPETTO_SERVE_CONFIG"
KEY_VARIABLE = "GEPPETTO_SERVER_KEY"


@dataclass
class ServeOptions:
    engine: EngineSettings = field(default_factory=EngineSettings)
    host: str = "127.0.0.1"
    port: int = 8000
    store: str | None = None
    bus: str | None = None
    workers: int = 1
    with_tools: bool = False
    mcp: list[str] = field(default_factory=list)
    max_body: int | None = None
    sweep_interval: float = SWEEP_INTERVAL
    log_level: str = "warning"
    log_format: str = "text"
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)
    limits: str | None = None
    """``--limits``: usage limits of every session, ``max_requests=20,max_cost=1.5`` (see UsageLimits.parse)."""
    temporal: str | None = None
    """``--temporal HOST:PORT``: prompts run as durable sessions on Temporal (docs/durable.md)."""
    task_queue: str = "geppetto"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _wildcard(host: str) -> bool:
    return host in ("", "0.0.0.0", "::", "[::]")


def allowed_hosts(options: ServeOptions) -> list[str]:
    """The names a request may give in ``Host``: the address listened on (unless it is every address),
    and ``--allowed-host`` (the loopback names are always allowed)."""
    return [*([] if _wildcard(options.host) else [options.host]), *options.allowed_hosts]


def check(options: ServeOptions, api_key: str | None) -> None:
    """Refuse settings that would serve unsafely or lose events, naming the fix."""
    if not _loopback(options.host) and not api_key:
        raise UsageError(
            f"--host {options.host} is reachable from other machines: set an API key with --api-key or "
            f"{KEY_VARIABLE} (clients then send 'Authorization: Bearer <key>')"
        )
    if options.workers < 1:
        raise UsageError("--workers must be 1 or more")
    if options.log_level not in LOG_LEVELS:
        raise UsageError(f"--log-level {options.log_level!r}: use one of {', '.join(LOG_LEVELS)}")
    if options.log_format not in LOG_FORMATS:
        raise UsageError(f"--log-format {options.log_format!r}: use text or json (one JSON object a line)")
    if options.workers > 1 and (options.bus is None or options.bus.startswith("memory")):
        raise UsageError(
            f"--workers {options.workers} needs a bus the workers share, or a reader on one worker misses the "
            "events of another: add --bus redis://127.0.0.1:6379/0 or --bus nats://127.0.0.1:4222"
        )


def app_from_env() -> Any:
    """The app of one worker, from the settings ``geppetto serve`` put in :data:`CONFIG_VARIABLE`."""
    from ..runtime import demo_registry
    from . import DEFAULT_MAX_BODY, create_app
    from ._runner import worker_name

    raw = json.loads(os.environ[CONFIG_VARIABLE])
    options = ServeOptions(**{**raw, "engine": EngineSettings(**raw["engine"])})
    configure_logging(options.log_level, options.log_format, worker=worker_name())
    profile = choose_profile(options.engine)
    return create_app(
        profile,
        store=options.store,
        bus=options.bus,
        api_key=os.environ.get(KEY_VARIABLE) or None,
        tools=demo_registry() if options.with_tools else None,
        mcp=options.mcp,
        max_body=options.max_body or DEFAULT_MAX_BODY,
        sweep_interval=options.sweep_interval,
        allowed_hosts=allowed_hosts(options),
        allowed_origins=options.allowed_origins,
        limits=UsageLimits.parse(options.limits) if options.limits else profile.usage_limits(),
        temporal=options.temporal,
        task_queue=options.task_queue,
    )


def check_port(host: str, port: int) -> None:
    """Refuse a port another program holds, before anything is printed (uvicorn would report it as a raw
    ``Errno 98`` after our "serve on" line). The socket is bound as uvicorn binds it, then released."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UsageError(port_in_use(host, port)) from None
            raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


@contextlib.contextmanager
def _shared_simulator(options: ServeOptions) -> Iterator[ServeOptions]:
    """Several workers and a simulator profile: one simulator, run here, that every worker's engine talks
    to, so a chain started on one worker continues on another (a simulator per worker would not know the
    other's responses). One worker keeps its simulator in-process."""
    profile = choose_profile(options.engine)
    if options.workers == 1 or not profile.simulator or profile.base_url:
        yield options
        return
    from ..simulator import serve as run_simulator

    with run_simulator() as sim:
        url = sim.openai_url if profile.provider.startswith("openai") else sim.url
        yield replace(options, engine=replace(options.engine, base_url=url))


def serve(options: ServeOptions, api_key: str | None) -> None:
    """Run until SIGINT/SIGTERM. Settings are checked (and the profile chosen) before anything listens."""
    check(options, api_key)
    if options.limits:
        UsageLimits.parse(options.limits)  # a wrong limit fails here, before anything listens
    configure_logging(options.log_level, options.log_format, worker=f"serve:{os.getpid()}")
    choose_profile(options.engine)
    check_port(options.host, options.port)
    with _shared_simulator(options) as shared:
        _run(shared, api_key)


def _run(options: ServeOptions, api_key: str | None) -> None:
    import uvicorn

    os.environ[CONFIG_VARIABLE] = json.dumps(asdict(options))
    if api_key:
        os.environ[KEY_VARIABLE] = api_key
    where = f"http://{options.host}:{options.port}"
    print(
        f"geppetto serve on {where} ({options.workers} worker{'s' if options.workers > 1 else ''}, "
        f"store {redact_url(options.store or 'default SQLite')}, bus {redact_url(options.bus or 'in-process')}"
        + (f", durable sessions on Temporal at {options.temporal}" if options.temporal else "")
        + "); "
        f"API at {where}/openapi.json",
        flush=True,
    )
    uvicorn.run(
        "geppetto.server._serve:app_from_env",
        factory=True,
        host=options.host,
        port=options.port,
        workers=options.workers if options.workers > 1 else None,
        log_config=None,  # the handler configure_logging put on uvicorn's loggers, in each worker too
        log_level=options.log_level,
        access_log=False,
        timeout_graceful_shutdown=10,
        # Clients hold event streams open for long; a short keep-alive closes their idle request
        # connections just as they reuse them (a reset the client sees as a failed request).
        timeout_keep_alive=75,
    )
