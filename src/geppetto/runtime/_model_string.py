"""``engine_for("provider:model")``: an engine from a model string, built as a profile is (``build_engine``)."""

from __future__ import annotations

import weakref
from typing import Any

from .._exceptions import ConfigurationError, UsageError
from ..engine import Engine
from ..profiles import PROVIDERS, SIM_PROFILE, Profile, build_engine, check_base_url, closest, resolve_api_key
from ._engines import FALLBACK_MODEL, SIM_API_KEY, _sim_base_url

__all__ = ["MODEL_PREFIXES", "engine_for"]

MODEL_PREFIXES: dict[str, str] = {
    "openai": "openai-responses",
    "openai-chat": "openai-chat",
    "anthropic": "anthropic",
    "gemini": "gemini",
    "gemini-interactions": "gemini-interactions",
    "sim": "",
}
"""Model-string prefix -> provider (as profiles name it); ``sim`` is the bundled simulator."""

_SETTINGS = (
    "api_key",
    "api_key_env",
    "base_url",
    "mode",
    "store",
    "temperature",
    "max_tokens",
    "reasoning_effort",
    "background",
)


def _prefixes() -> str:
    return ", ".join(f"{p}:" for p in MODEL_PREFIXES)


def engine_for(model: str, **settings: Any) -> Engine:
    """The engine a model string names: ``"openai:gpt-4.1"`` (Responses), ``"openai-chat:..."``,
    ``"anthropic:claude-sonnet-4-5"``, ``"gemini:gemini-2.5-flash"``, ``"gemini-interactions:..."``, or
    ``"sim"`` (the bundled simulator, started in-process and stopped when the engine is closed; also
    ``"sim:anthropic"``, ``"sim:gemini:gemini-2.5-flash"``...: that provider's API, simulated).

    ``settings`` are a profile's: ``api_key`` (else the provider's usual variable, ``OPENAI_API_KEY``,
    ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``; or ``api_key_env`` naming another),
    ``base_url`` (a server of one's own), ``mode``, ``store``, ``temperature``, ``max_tokens``,
    ``reasoning_effort``, ``background``. Close the engine when done (``async with engine_for(...) as
    engine``, or ``await engine.aclose()``).

    Raises :class:`~geppetto.UsageError` for an unknown prefix or setting (listing the right ones) and
    :class:`~geppetto.ConfigurationError` naming the variable to set when no key is found.
    """
    if not isinstance(model, str):
        raise UsageError(f"engine_for takes a model string such as 'openai:gpt-4.1', got {type(model).__name__}")
    unknown = sorted(set(settings) - set(_SETTINGS))
    if unknown:
        raise UsageError(f"engine_for does not take {unknown[0]!r}; it takes {', '.join(_SETTINGS)}")
    prefix, _, name = model.partition(":")
    if prefix not in MODEL_PREFIXES:
        close = closest(prefix, list(MODEL_PREFIXES))
        hint = f" (did you mean '{close}:'?)" if close else ""
        if not _:
            raise UsageError(
                f"model string {model!r} names no provider{hint}: write it as 'provider:model', "
                f"e.g. 'openai:{model}'; the prefixes are {_prefixes()}"
            )
        raise UsageError(f"unknown model prefix {prefix!r} in {model!r}{hint}; use one of {_prefixes()}")
    if prefix == "sim":
        return _simulated(model, name, settings)
    provider = MODEL_PREFIXES[prefix]
    if not name:
        raise UsageError(f"model string {model!r} names no model: write e.g. '{prefix}:{FALLBACK_MODEL[provider]}'")
    api_key = settings.pop("api_key", None)
    if settings.get("base_url") is not None:
        check_base_url(settings["base_url"], "base_url=")
    profile = Profile(name=model, provider=provider, model=name, **settings)
    if api_key is None:
        api_key = _key(profile, model)
    return build_engine(profile, api_key=api_key)


def _key(profile: Profile, model: str) -> str:
    try:
        return resolve_api_key(profile)
    except ConfigurationError:
        names = (profile.api_key_env,) if profile.api_key_env else PROVIDERS[profile.provider]
        raise ConfigurationError(
            f"no API key for {model!r}: set {' or '.join(names)}, or pass api_key=...; "
            "the model string 'sim' runs offline on the bundled simulator"
        ) from None


def _simulated(model: str, rest: str, settings: dict[str, Any]) -> Engine:
    """An engine of the provider ``rest`` names (``anthropic``, ``gemini:gemini-2.5-flash``, a bare model
    for Responses) against a simulator started now and stopped with the engine."""
    head, _, tail = rest.partition(":")
    if head in MODEL_PREFIXES and head != "sim":
        provider, name = MODEL_PREFIXES[head], tail or FALLBACK_MODEL[MODEL_PREFIXES[head]]
    else:
        provider, name = SIM_PROFILE.provider, rest or SIM_PROFILE.model
    if settings.get("base_url") is not None:
        raise UsageError(f"{model!r} runs the bundled simulator: drop base_url= (or use a provider prefix)")
    settings.pop("api_key", None)
    settings.pop("api_key_env", None)
    if provider == SIM_PROFILE.provider:
        settings.setdefault("mode", SIM_PROFILE.mode)
    profile = Profile(name=model, provider=provider, model=name, simulator=True, **settings)
    try:
        from ..simulator import Simulator
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    sim = Simulator()
    sim.start()
    try:
        engine = build_engine(profile, api_key=SIM_API_KEY, base_url=_sim_base_url(sim, provider))
    except BaseException:
        sim.stop()
        raise
    _stop_with(engine, sim)
    return engine


def _stop_with(engine: Any, sim: Any) -> None:
    """Stop ``sim`` when ``engine`` is closed (or collected, or the process exits)."""
    stop = weakref.finalize(engine, sim.stop)
    close = engine.aclose

    async def aclose() -> None:
        try:
            await close()
        finally:
            stop()

    engine.aclose = aclose
    engine.simulator = sim
