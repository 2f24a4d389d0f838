"""``geppetto serve``: sessions over HTTP for web front-ends, on one worker or many.

``create_app(...)`` builds the app (FastAPI, over Starlette; mount it in your own, or let ``geppetto serve``
run it under uvicorn). The store is the truth (SQLite for one process, PostgreSQL for many), the bus carries the events
(in-process, Redis Streams or NATS JetStream), and the store's per-session lease lets one inference run per
session across all workers. See ``docs/server.md``.

The names imported as ``name as name`` and left out of ``__all__`` are geppetto's own internal API: the entry
and options ``geppetto serve`` runs. Not part of the public API; they may change in any release.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

try:
    import ag_ui.core  # noqa: F401
    import fastapi  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    from .._extras import install_hint

    raise ImportError(f"geppetto.server needs {exc.name}: {install_hint('server')}") from None

from starlette.applications import Starlette

from ..engine import Engine
from ..events.bus import EventBus, open_bus
from ..profiles import Profile
from ..session import UsageLimits
from ..session.stores import SQLTurnStore, open_store
from ..tools import ToolRegistry
from ._app import DEFAULT_MAX_BODY, build_app
from ._main import main as main
from ._runner import RUN_FINISHED, RUN_STARTED, SWEEP_INTERVAL, Runner
from ._serve import ServeOptions as ServeOptions
from ._serve import serve as serve

__all__ = ["DEFAULT_MAX_BODY", "RUN_FINISHED", "RUN_STARTED", "Runner", "create_app"]


def create_app(
    profile: Profile | str | None = None,
    *,
    store: SQLTurnStore | str | None = None,
    bus: EventBus | str | None = None,
    api_key: str | None = None,
    tools: ToolRegistry | None = None,
    mcp: Sequence[Any] = (),
    engine_for: Callable[[dict[str, Any]], Engine] | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    sweep_interval: float = SWEEP_INTERVAL,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    limits: UsageLimits | None = None,
    temporal: str | None = None,
    task_queue: str = "geppetto",
) -> Starlette:
    """The ``geppetto serve`` app.

    ``profile``: a :class:`~geppetto.profiles.Profile` or a profile name (None: the profiles file's default),
    whose engine answers every session (a session's ``model`` and ``mode`` settings override it; a
    simulator profile runs the bundled simulator in the worker). ``store``: a store or ``open_store`` target
    (None: ``$GEPPETTO_STORE`` or the SQLite default). ``bus``: a bus or URL (None: in-process). ``tools``
    and the profile's and ``mcp``'s MCP servers are offered to every session. ``engine_for(settings)``
    replaces the profile's engine (tests, custom engines). ``api_key`` requires ``Authorization: Bearer``.
    ``sweep_interval``: seconds between the worker's sweeps (:meth:`Runner.sweep`; 0: none).
    ``allowed_hosts``: the names clients reach the server by (``Host``), besides localhost, 127.0.0.1 and
    [::1] (``*``: any); ``allowed_origins``: other sites (``https://app.example``) whose pages may call it
    (CORS answered for them only; ``*``: any). ``limits``: the :class:`~geppetto.UsageLimits` of every session
    (None: the profile's ``limits``, if any). JSON bodies must be sent as ``application/json``.
    ``temporal`` (``HOST:PORT``): every session's prompts run as durable sessions on that Temporal service,
    on ``task_queue``, this process running a worker for it (docs/durable.md; the ``temporal`` extra).
    """
    the_store = store if isinstance(store, SQLTurnStore) else open_store(store)
    the_bus = bus if bus is not None and not isinstance(bus, str) else open_bus(bus)
    if limits is None and engine_for is None and isinstance(profile, Profile):
        limits = profile.usage_limits()
    runner = Runner(the_store, the_bus, engine_for or _unavailable, tools, sweep_interval=sweep_interval, limits=limits)
    profiled = None if engine_for is not None else (profile, tools, mcp)
    app = build_app(
        runner,
        api_key=api_key,
        max_body=max_body,
        lifespan=_lifespan(
            runner,
            profiled,
            owns_store=not isinstance(store, SQLTurnStore),
            temporal=(temporal, task_queue) if temporal else None,
        ),
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
    )
    app.state.runner = runner
    return app


def _lifespan(
    runner: Runner,
    profiled: tuple[Profile | str | None, ToolRegistry | None, Sequence[Any]] | None,
    *,
    owns_store: bool,
    temporal: tuple[str, str] | None = None,
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    """The app's lifespan: the profile's engines opened (``profiled``: the profile, tools and MCP servers;
    None when the caller gave the engines), the worker listening; then everything closed, the store too
    when the app opened it (``owns_store``)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if profiled is not None:
                runner.engine_for, runner.tools, runner.engine_record = await stack.enter_async_context(
                    _profile_engines(*profiled)
                )
                runner.profile_name = str(runner.engine_record.get("profile", ""))
            if temporal is not None:
                from ._durable import DurableRuns

                durable = DurableRuns(runner, *temporal)
                await durable.start()
                stack.push_async_callback(durable.close)
                runner.durable = durable
            await runner.start_listening()
            try:
                yield
            finally:
                await runner.close()
                await runner.bus.close()
                if owns_store:
                    runner.store.close()

    return lifespan


def _unavailable(settings: dict[str, Any]) -> Engine:
    raise RuntimeError("the app has not started: run it under an ASGI server (its lifespan opens the engine)")


@contextlib.asynccontextmanager
async def _profile_engines(
    profile: Profile | str | None, tools: ToolRegistry | None, mcp: Sequence[Any]
) -> AsyncIterator[tuple[Callable[[dict[str, Any]], Engine], ToolRegistry | None, dict[str, Any]]]:
    """The engine factory for ``profile`` (its MCP servers and simulator running meanwhile), its tools and
    what a session records of it (:func:`geppetto.runtime.engine_record`: its name, provider, model, mode)."""
    from ..runtime import EngineSettings, choose_profile, engine_record, mcp_tools, open_engine

    chosen = profile if isinstance(profile, Profile) else choose_profile(EngineSettings(profile=profile))
    async with mcp_tools([*(chosen.mcp_servers or []), *mcp], tools) as registry:
        with open_engine(chosen, registry) as opened:
            engines: dict[tuple[str | None, str | None], Engine] = {}

            def engine_for(settings: dict[str, Any]) -> Engine:
                key = (settings.get("model"), settings.get("mode"))
                if key not in engines:
                    engines[key] = opened.rebuild(model=key[0], mode=key[1]).engine if any(key) else opened.engine
                return engines[key]

            yield engine_for, registry, engine_record(chosen)
