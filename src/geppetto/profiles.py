"""Named engine settings in a YAML file, turned into engines.

The file is ``profiles.yaml`` in the user's config folder: ``$GEPPETTO_CONFIG_DIR`` when set, else
``$XDG_CONFIG_HOME/geppetto``, else ``~/.config/geppetto``::

    default: work
    profiles:
      work:
        provider: openai-responses      # openai-responses | openai-chat | anthropic | gemini | gemini-interactions
        model: gpt-5
        api_key_env: WORK_OPENAI_KEY    # optional; else the provider's standard variable
        base_url: null                  # optional; the provider's official endpoint when null
        mode: chained                   # openai-responses: stateless | chained | conversation; gemini-interactions: stateless | chained
        store: true
        temperature: null
        max_tokens: null
        reasoning_effort: null
        options:                        # any option of the provider's engine (docs: "Engine options")
          compact_threshold: 200000
          prefix_policy: error

A built-in profile ``sim`` targets the bundled simulator (started in-process by the CLI). Keys are read
from the environment only and never printed.
"""

from __future__ import annotations

import difflib
import importlib
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import yaml

from ._exceptions import ConfigurationError, UsageError
from .tools import MCP_SERVER_KEYS

if TYPE_CHECKING:
    from .engine import Engine
    from .providers.settings import FamilySettings

__all__ = [
    "PROVIDERS",
    "Profile",
    "build_engine",
    "config_dir",
    "load_profiles",
    "profiles_path",
    "resolve_api_key",
]

PROVIDERS: dict[str, tuple[str, ...]] = {
    "openai-responses": ("OPENAI_API_KEY",),
    "openai-chat": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "gemini-interactions": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}


@dataclass(frozen=True)
class Profile:
    """One named set of engine settings."""

    name: str
    provider: str = "openai-responses"
    model: str = ""
    base_url: str | None = None
    api_key_env: str | None = None
    mode: str | None = None
    store: bool | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    background: bool | None = None
    """Responses only: background responses (resumed after a broken stream, picked up by another worker)."""
    simulator: bool = False
    """Start the bundled simulator and point the engine at it."""
    limits: dict[str, Any] | None = None
    """Usage limits of the sessions run with this profile (``max_requests``, ``max_cost``, ... as
    :class:`~geppetto.UsageLimits` takes them); see :meth:`usage_limits`."""
    options: dict[str, Any] | None = None
    """Any option of the provider's engine, by the engine's own name (``compact_threshold``,
    ``prefix_policy``, ``prompt_cache_key``, ...: the fields of its family's settings in
    :mod:`geppetto.providers.settings`); checked when the file is read, the error naming the valid keys."""
    mcp_servers: list[Any] | None = None
    """MCP servers whose tools ``run`` and ``chat`` offer: command lines, URLs, or mappings with the keys
    :meth:`McpServer.from_spec <geppetto.tools.mcp.McpServer.from_spec>` takes (needs the ``mcp`` extra)."""
    problem: str | None = None
    """Why this profile cannot be used (its entry in the file is wrong); the file's other profiles still load,
    and using this one raises :class:`~geppetto.ConfigurationError` with this text."""
    note: str | None = None
    """Something about this profile a person should see when it is used (e.g. an ignored entry)."""

    def with_overrides(self, **overrides: Any) -> Profile:
        """A copy with every non-None override applied. ``options`` are added to the profile's own; an
        override wins over the profile's value however either wrote it (``--mode`` over ``options: {mode:
        ...}``, ``-o background=false`` over ``background: true``)."""
        changes = {k: v for k, v in overrides.items() if v is not None}
        given = changes.pop("options", None) or {}
        options = dict(self.options or {})
        for name in _OPTIONAL:
            engine_name = _ALIASES.get(name, name)
            if name in changes:
                options.pop(name, None)
                options.pop(engine_name, None)
            elif name in given or engine_name in given:
                changes[name] = None  # the shorthand gives way to the option given now
        options.update(given)
        return replace(self, **changes, options=options or None)

    def engine_settings(self) -> FamilySettings:
        """The settings value of the provider's engine this profile describes: its ``options`` and the
        shorthand keys (``mode``, ``store``, ``temperature``, ``max_tokens``, ``reasoning_effort``,
        ``background``). A key the engine does not take, or one given both ways, is a ConfigurationError."""
        from .providers.settings import SETTINGS

        cls = SETTINGS[self.provider]
        where = f"profile {self.name!r}"
        merged = dict(self.options or {})
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value is None:
                continue
            if name not in cls.names() and _ALIASES.get(name) in cls.names():
                name = _ALIASES[name]  # same setting, the engine's own name for it
            elif name not in cls.names():
                raise ConfigurationError(
                    f"{where}: provider {self.provider!r} does not take {name!r}; remove it from the profile"
                )
            if name in merged and merged[name] != value:
                raise ConfigurationError(
                    f"{where} sets {name!r} twice, as a key ({value!r}) and under options ({merged[name]!r}); keep one"
                )
            merged[name] = value
        return cls.from_options(merged, where=where)

    def usage_limits(self) -> Any:
        """The profile's ``limits`` as a :class:`~geppetto.UsageLimits` (None when it sets none)."""
        if not self.limits:
            return None
        from .session import UsageLimits

        return UsageLimits.from_dict(self.limits)

    def public_dict(self) -> dict[str, Any]:
        """The settings as shown to a person (no secrets are ever held here)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


FLAGS_PROFILE = "(flags)"
"""The name of the profile built from command-line flags when no profile is chosen."""

# setting -> (accepted types, what to write); checked when the profiles file is read.
_SETTING_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "provider": ((str,), "a provider name"),
    "model": ((str,), "a model name"),
    "base_url": ((str,), "a URL"),
    "api_key_env": ((str,), "an environment variable name"),
    "mode": ((str,), "stateless, chained or conversation"),
    "store": ((bool,), "true or false"),
    "temperature": ((int, float), "a number such as 0.2"),
    "max_tokens": ((int,), "a whole number such as 1024"),
    "reasoning_effort": ((str,), "minimal, low, medium or high"),
    "background": ((bool,), "true or false"),
    "simulator": ((bool,), "true or false"),
    "limits": ((dict,), "a mapping such as {max_requests: 20, max_cost: 1.5}"),
    "mcp_servers": ((list,), "a list of MCP servers: command lines, URLs or mappings"),
    "options": ((dict,), "a mapping of engine options such as {compact_threshold: 200000}"),
}
MODES = ("stateless", "chained", "conversation")


def _check_settings(path: Path, name: str, raw: dict[str, Any]) -> None:
    """Every value of profile ``name`` has the right type, so a typo fails here and not as a provider 400."""
    for key, value in raw.items():
        types, wanted = _SETTING_TYPES[key]
        wrong_bool = isinstance(value, bool) and bool not in types
        if value is not None and (wrong_bool or not isinstance(value, types)):
            raise ConfigurationError(f"{path}: profiles.{name}.{key} is {value!r}; write {wanted}")
    if isinstance(raw.get("base_url"), str):
        check_base_url(raw["base_url"], f"{path}: profiles.{name}.base_url")
    if raw.get("mode") not in (None, *MODES):
        raise ConfigurationError(f"{path}: profiles.{name}.mode is {raw['mode']!r}; write {', '.join(MODES)}")
    if isinstance(raw.get("max_tokens"), int) and raw["max_tokens"] < 1:
        raise ConfigurationError(f"{path}: profiles.{name}.max_tokens must be at least 1")
    if isinstance(raw.get("options"), dict):
        from .providers.settings import SETTINGS

        family = SETTINGS.get(raw.get("provider", "openai-responses"))
        if family is not None:
            family.from_options(raw["options"], where=f"{path}: profiles.{name}.options")
    if isinstance(raw.get("limits"), dict):
        from .session import UsageLimits

        try:
            UsageLimits.from_dict(raw["limits"])
        except (UsageError, TypeError) as exc:
            raise ConfigurationError(f"{path}: profiles.{name}.limits: {exc}") from None
    for i, entry in enumerate(raw.get("mcp_servers") or []):
        where = f"{path}: profiles.{name}.mcp_servers[{i}]"
        if isinstance(entry, dict):
            unknown = sorted(str(k) for k in entry if k not in MCP_SERVER_KEYS)
            if unknown:
                raise ConfigurationError(
                    _unknown(path, f"profiles.{name}.mcp_servers[{i}].", unknown[0], MCP_SERVER_KEYS)
                )
            if ("command" in entry) == ("url" in entry):
                raise ConfigurationError(f"{where} needs either `command` or `url`")
        elif not isinstance(entry, str) or not entry.strip():
            raise ConfigurationError(
                f"{where} is {entry!r}; write a command line, a URL, or a mapping with `command` or `url`"
            )


SIM_PROFILE = Profile(name="sim", provider="openai-responses", model="sim-1", simulator=True, mode="chained")


def config_dir() -> Path:
    """The folder holding ``profiles.yaml``."""
    if env := os.environ.get("GEPPETTO_CONFIG_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "geppetto"


def profiles_path() -> Path:
    return config_dir() / "profiles.yaml"


_TOP_LEVEL = ("default", "profiles")


def _unknown(path: Path, where: str, name: str, allowed: Sequence[str]) -> str:
    """The error text for an unknown key, with the allowed ones and the closest match."""
    close = closest(name, allowed)
    hint = f" (did you mean {close!r}?)" if close else ""
    return f"{path}: {where}{name!r} is not a setting{hint}; allowed: {', '.join(allowed)}"


def closest(name: str, allowed: Sequence[str]) -> str | None:
    """The allowed word ``name`` was most likely meant to be: two swapped letters (``modle`` for ``model``)
    first, then the closest by spelling."""
    close = difflib.get_close_matches(name, allowed, n=3)
    swapped = [word for word in close if sorted(word) == sorted(name)]
    best = swapped or close
    return best[0] if best else None


def check_base_url(url: str, where: str) -> None:
    """Refuse a base URL that is not an http(s) URL with a host, naming ``where`` it came from: a usage error
    now rather than a request that fails three times."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"{where} {url!r} is not an http(s) URL; write one such as http://127.0.0.1:8765/v1")


def load_profiles(path: Path | None = None) -> tuple[dict[str, Profile], str | None]:
    """All profiles (the built-in ``sim`` first) and the name of the default one, if the file sets it.

    A file that cannot be read, or whose top level has a key other than ``default`` and ``profiles``, is a
    :class:`~geppetto.ConfigurationError`. A wrong profile fails alone: it is returned with its ``problem``
    set (using it raises that), and the others load. A profile named ``sim`` in the file is ignored (the
    built-in ``sim`` keeps its name) and says so in the built-in's ``note``.
    """
    p = path or profiles_path()
    profiles = {"sim": SIM_PROFILE}
    if not p.exists():
        return profiles, None
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ConfigurationError(f"{p}: cannot read the profiles file ({exc.strerror}); fix or remove it") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigurationError(f"{p}: not valid YAML{where}; fix or remove the file") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("profiles", {}), dict):
        raise ConfigurationError(f"{p}: expected a mapping with 'profiles: {{name: {{provider, model, ...}}}}'")
    for key in doc:
        if key not in _TOP_LEVEL:
            raise ConfigurationError(_unknown(p, "", str(key), _TOP_LEVEL))
    for name, raw in (doc.get("profiles") or {}).items():
        name = str(name)
        if name == "sim":
            profiles["sim"] = replace(
                SIM_PROFILE,
                note=f"{p} defines a profile named 'sim', which is ignored: 'sim' is the built-in simulator "
                "profile; rename yours",
            )
            continue
        try:
            profiles[name] = _profile(p, name, raw)
        except ConfigurationError as exc:
            profiles[name] = Profile(name=name, problem=str(exc))
    default = doc.get("default")
    if default is not None and default not in profiles:
        raise ConfigurationError(f"{p}: default profile {default!r} is not defined under 'profiles'")
    return profiles, default


def _profile(p: Path, name: str, raw: Any) -> Profile:
    known = sorted({f.name for f in fields(Profile)} - {"name", "problem", "note"})
    if not isinstance(raw, dict):
        raise ConfigurationError(f"{p}: profiles.{name} must be a mapping of settings")
    for key in raw:
        if key not in known:
            raise ConfigurationError(_unknown(p, f"profiles.{name}.", str(key), known))
    _check_settings(p, name, raw)
    provider = raw.get("provider", "openai-responses")
    if provider not in PROVIDERS:
        raise ConfigurationError(f"{p}: profiles.{name}.provider {provider!r}; use one of {', '.join(PROVIDERS)}")
    return Profile(name=name, **raw)


def resolve_api_key(profile: Profile) -> str:
    """The API key for ``profile`` from the environment; an error naming the variable to set."""
    names = (profile.api_key_env,) if profile.api_key_env else PROVIDERS[profile.provider]
    for name in names:
        if value := os.environ.get(name):
            return value
    wanted = " or ".join(names)
    # A server of one's own (Ollama, vLLM, the simulator) often checks no key, but the client still sends one.
    local = (
        f"; for a server at {profile.base_url} that checks no key, any value will do ({names[0]}=unused)"
        if profile.base_url
        else ""
    )
    if profile.name == FLAGS_PROFILE:
        raise ConfigurationError(
            f"no API key: set {wanted}, define a profile in {profiles_path()}, or use --profile sim to run "
            f"offline{local}"
        )
    raise ConfigurationError(
        f"no API key for profile {profile.name!r}: set {wanted}, or use --profile sim to run offline{local}"
    )


# provider name -> (module, class); imported only when a profile uses it.
ENGINE_CLASSES: dict[str, tuple[str, str]] = {
    "openai-responses": ("geppetto.providers.openai_responses", "ResponsesEngine"),
    "openai-chat": ("geppetto.providers.openai_chat", "ChatEngine"),
    "anthropic": ("geppetto.providers.anthropic", "ClaudeEngine"),
    "gemini": ("geppetto.providers.gemini", "GeminiEngine"),
    "gemini-interactions": ("geppetto.providers.gemini", "InteractionsEngine"),
}

_OPTIONAL = ("mode", "store", "temperature", "max_tokens", "reasoning_effort", "background")
_ALIASES = {"max_tokens": "max_output_tokens"}


def build_engine(
    profile: Profile, *, api_key: str | None = None, base_url: str | None = None, tools: list[Any] | None = None
) -> Engine:
    """The engine ``profile`` describes.

    ``tools`` (tool definitions or dicts) are offered on every request. ``api_key`` defaults to :func:`resolve_api_key` (so a missing key is a :class:`ConfigurationError`
    naming the variable); ``base_url`` overrides the profile's. The engine gets every option of
    :meth:`Profile.engine_settings` that differs from its default; a setting the provider's engine does
    not take (``mode`` on Anthropic, say) is an error naming it rather than silently dropped.
    """
    if profile.problem is not None:
        raise ConfigurationError(profile.problem)
    if profile.provider not in ENGINE_CLASSES:
        raise ConfigurationError(
            f"profile {profile.name!r}: unknown provider {profile.provider!r}; use one of {', '.join(ENGINE_CLASSES)}"
        )
    module_name, class_name = ENGINE_CLASSES[profile.provider]
    try:
        engine_cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(
            f"provider {profile.provider!r} is not available in this install ({exc}); pick another with --provider"
        ) from None
    if not profile.model:
        raise ConfigurationError(
            f"profile {profile.name!r} names no model; set 'model:' in the profile or pass --model"
        )
    key = api_key if api_key is not None else resolve_api_key(profile)
    options: dict[str, Any] = profile.engine_settings().options()
    if tools:
        options["tools"] = tools
    engine: Engine = engine_cls(model=profile.model, api_key=key, base_url=base_url or profile.base_url, **options)
    return engine
