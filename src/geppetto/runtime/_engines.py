"""From a profile to a running engine: choosing the profile, opening its engine (and the simulator), its MCP tools.

Shared by the command and the server (neither imports the other for it)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .._exceptions import ConfigurationError, UsageError
from ..engine import Engine, Handler
from ..profiles import (
    FLAGS_PROFILE,
    PROVIDERS,
    Profile,
    build_engine,
    check_base_url,
    load_profiles,
    resolve_api_key,
)
from ..tools import ToolRegistry
from ..turns import Turn, turn_meta_key

__all__ = [
    "CHAT_ENGINE",
    "FALLBACK_MODEL",
    "SIM_API_KEY",
    "EngineSettings",
    "McpHold",
    "Opened",
    "choose_profile",
    "engine_record",
    "mcp_tools",
    "open_engine",
    "parse_options",
    "recording_engine",
]

SIM_API_KEY = "sk-sim"
FALLBACK_MODEL = {
    "openai-responses": "gpt-4.1-mini",
    "openai-chat": "gpt-4.1-mini",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
    "gemini-interactions": "gemini-2.5-flash",
}


@dataclass(frozen=True)
class EngineSettings:
    """The engine options a command line gives (each None when not given)."""

    profile: str | None = None
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    mode: str | None = None
    options: dict[str, Any] | None = None
    """``-o KEY=VALUE`` engine options (:func:`parse_options`), over the profile's ``options``."""

    def resumed(self, stored: dict[str, Any] | None) -> EngineSettings:
        """These flags over the settings a saved conversation recorded (:data:`CHAT_ENGINE`): a flag wins,
        and ``--profile`` or ``--provider`` starts from that choice alone, since the stored model, endpoint
        and mode belonged to the stored one."""
        if not stored or self.profile is not None or self.provider is not None:
            return self
        profile = stored.get("profile")
        named = isinstance(profile, str) and profile != FLAGS_PROFILE
        return EngineSettings(
            profile=profile if named else None,
            provider=None if named else _text(stored.get("provider")),
            model=self.model or _text(stored.get("model")),
            base_url=self.base_url or _text(stored.get("base_url")),
            mode=self.mode or _text(stored.get("mode")),
            options=self.options,
        )


def parse_options(pairs: Sequence[str] | None) -> dict[str, Any] | None:
    """``-o KEY=VALUE`` flags as engine options: a value that parses as JSON is that (``2000``, ``true``,
    ``null``, ``{"type": "auto"}``), any other is the string as written. None when no flag was given."""
    if not pairs:
        return None
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"-o {pair!r}: write KEY=VALUE, e.g. -o compact_threshold=200000")
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        options[key.strip()] = value
    return options


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


CHAT_ENGINE = turn_meta_key("geppetto", "chat_engine", 1, dict)
"""The settings a chat ran on (profile, provider, model, base URL given, mode), recorded on each answer so
``chat --continue`` resumes on them. Never a key."""


def engine_record(profile: Profile) -> dict[str, Any]:
    """What :data:`CHAT_ENGINE` holds for ``profile`` (a simulator's own URL is left out: it changes)."""
    record = {"profile": profile.name, "provider": profile.provider, "model": profile.model, "mode": profile.mode}
    if profile.base_url:
        record["base_url"] = profile.base_url
    return {k: v for k, v in record.items() if v is not None}


def recording_engine(record: Callable[[], dict[str, Any] | None]) -> Callable[[Handler], Handler]:
    """Middleware: each answer records the settings it ran on (:data:`CHAT_ENGINE`, from ``record()``; None
    records nothing), so ``geppetto chat --continue`` resumes a session on them, whether ``chat`` or
    ``geppetto serve`` made it."""

    def middleware(next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            out = await next_handler(turn)
            if (value := record()) is not None:
                CHAT_ENGINE.set(out.metadata, value)
            return out

        return handler

    return middleware


def choose_profile(settings: EngineSettings) -> Profile:
    """The profile named on the command line, else the file's default, else one built from the flags.

    Raises :class:`~geppetto.ConfigurationError` naming the fix for an unknown profile or provider.
    """
    if settings.provider is not None and settings.provider not in PROVIDERS:
        raise ConfigurationError(f"unknown provider {settings.provider!r}; use one of {', '.join(PROVIDERS)}")
    if settings.base_url is not None:
        check_base_url(settings.base_url, "--base-url")
    profiles, default = load_profiles()
    name = settings.profile or default
    if name is None:
        provider = settings.provider or "openai-responses"
        base = Profile(name=FLAGS_PROFILE, provider=provider, model=FALLBACK_MODEL[provider])
    elif name not in profiles:
        raise ConfigurationError(
            f"no profile named {name!r}; defined: {', '.join(profiles)} (see `geppetto profiles list`)"
        )
    else:
        base = profiles[name]
        if base.problem is not None:
            raise ConfigurationError(base.problem)
        if base.note is not None:
            print(f"warning: {base.note}", file=sys.stderr)
    provider = settings.provider or base.provider
    if settings.mode is not None and provider not in ("openai-responses", "gemini-interactions"):
        raise ConfigurationError(
            f"--mode applies to the openai-responses and gemini-interactions providers only, not {provider!r}; drop --mode"
        )
    if settings.provider is not None and settings.provider != base.provider:
        # Responses-only settings, and one engine's options, do not carry over to another provider.
        base = replace(base, provider=settings.provider, mode=None, store=None, options=None)
    chosen = base.with_overrides(
        model=settings.model, base_url=settings.base_url, mode=settings.mode, options=settings.options
    )
    if settings.options:
        from ..providers.settings import SETTINGS

        SETTINGS[chosen.provider].from_options(settings.options, where="-o")  # names the valid keys
        chosen.engine_settings()  # and the options together with the profile's
    return chosen


@dataclass
class Opened:
    """An engine ready to use, and the simulator behind it when the profile asked for one."""

    engine: Engine
    profile: Profile
    api_key: str
    base_url: str | None = None
    sim: Any = None
    tools: list[Any] | None = None

    def rebuild(self, **overrides: Any) -> Opened:
        """The same endpoint and key with other settings (for example another ``mode``)."""
        profile = self.profile.with_overrides(**overrides)
        engine = build_engine(profile, api_key=self.api_key, base_url=self.base_url, tools=self.tools)
        return Opened(engine, profile, self.api_key, self.base_url, self.sim, self.tools)


def _sim_base_url(sim: Any, provider: str) -> str:
    return str(sim.openai_url if provider.startswith("openai") else sim.url)


@contextlib.contextmanager
def open_engine(profile: Profile, tools: ToolRegistry | None = None) -> Iterator[Opened]:
    """Build ``profile``'s engine offering ``tools``; for a simulator profile without a base_url, run the
    simulator meanwhile."""
    specs = [d.to_dict() for d in tools.list()] if tools is not None else None
    if profile.simulator and not profile.base_url:
        from ..simulator import serve

        with serve() as sim:
            url = _sim_base_url(sim, profile.provider)
            engine = build_engine(profile, api_key=SIM_API_KEY, base_url=url, tools=specs)
            yield Opened(engine, profile, SIM_API_KEY, url, sim, specs)
        return
    key = SIM_API_KEY if profile.simulator else resolve_api_key(profile)
    yield Opened(build_engine(profile, api_key=key, tools=specs), profile, key, profile.base_url, None, specs)


@contextlib.asynccontextmanager
async def mcp_tools(specs: Sequence[Any], tools: ToolRegistry | None) -> AsyncIterator[ToolRegistry | None]:
    """``tools`` with the tools of the MCP servers ``specs`` added (the servers run until the block ends);
    ``tools`` as it is when there are none."""
    if not specs:
        yield tools
        return
    try:
        from ..tools.mcp import McpServers
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    async with McpServers(specs, registry=tools if tools is not None else ToolRegistry()) as servers:
        yield servers.registry


class McpHold:
    """MCP servers kept running across the prompts of a chat (one event loop, many ``runner.run`` calls):
    a task enters them and waits; :meth:`stop` lets it leave, in the task that entered."""

    def __init__(self, specs: Sequence[Any], tools: ToolRegistry | None) -> None:
        self.specs, self.tools = list(specs), tools
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> ToolRegistry | None:
        if not self.specs:
            return self.tools
        ready: asyncio.Future[ToolRegistry | None] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()

        async def hold() -> None:
            try:
                async with mcp_tools(self.specs, self.tools) as registry:
                    ready.set_result(registry)
                    assert self._stop is not None
                    await self._stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                    return
                raise

        self._task = asyncio.get_running_loop().create_task(hold())
        return await ready

    async def stop(self) -> None:
        if self._stop is not None and self._task is not None:
            self._stop.set()
            with contextlib.suppress(Exception):
                await self._task
