"""One settings value per engine family: the options an engine is made with, declared once.

Each engine family has a frozen dataclass here whose fields are exactly the engine's option keywords
(with the same defaults): :class:`ResponsesSettings`, :class:`InteractionsSettings`,
:class:`ChatSettings`, :class:`ClaudeSettings` and :class:`GeminiSettings`. The engine constructor builds
one from its keywords and keeps it as ``engine.settings``; profiles (``options:``), ``geppetto run``,
``chat`` and ``serve`` (``-o KEY=VALUE``) make one from a mapping with :meth:`FamilySettings.from_options`,
so an option added to a family's dataclass and to its engine's constructor is a profile key and a flag
with nothing else to change. What an engine is given that is not a value (tools, an HTTP client, a retry
policy, metrics) stays a constructor argument only.

A value is checked when it is made (``__post_init__``): an unknown key, a value of the wrong type or one
the API refuses is a :class:`~geppetto.ConfigurationError` naming the fix.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, TypeVar, Union

from .._exceptions import ConfigurationError

__all__ = [
    "SETTINGS",
    "ChatSettings",
    "ClaudeSettings",
    "FamilySettings",
    "GeminiSettings",
    "InteractionsSettings",
    "ResponsesSettings",
    "SettingsOwner",
]

_S = TypeVar("_S", bound="FamilySettings")

PromptCacheKey = Union[bool, str, Callable[[Any], "str | None"], None]  # noqa: UP007 (a runtime alias)
"""``prompt_cache_key``: True (a key per session), a key, a callable ``(turn) -> key`` or None/False (none)."""

RESPONSES_MODES = ("stateless", "chained", "conversation")
INTERACTIONS_MODES = ("chained", "stateless")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
REASONING_SUMMARIES = ("auto", "concise", "detailed")
PROMPT_CACHE_RETENTIONS = ("in_memory", "24h")
THINKING_LEVELS = ("minimal", "low", "medium", "high", "xhigh")
"""The Interactions API's ``thinking_level`` values (a ``reasoning_effort`` of the same name picks one)."""
_MAX_CACHE_KEY = 64


_NAMES: dict[type, tuple[str, ...]] = {}


@dataclass(frozen=True, kw_only=True)
class FamilySettings:
    """What every family's settings can do; subclasses declare the fields."""

    family: ClassVar[str] = ""
    """The profile ``provider`` these settings belong to (``openai-responses``, ...)."""

    checked_here: ClassVar[frozenset[str]] = frozenset()
    """Fields whose type the family's own check covers (with a message naming the fix), not the generic one."""

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name not in self.checked_here:
                _check_type(type(self), f.name, getattr(self, f.name))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The option names this family takes, in declaration order."""
        if cls not in _NAMES:  # asked on every attribute an engine sets (SettingsOwner): computed once
            _NAMES[cls] = tuple(f.name for f in fields(cls))
        return _NAMES[cls]

    @classmethod
    def from_options(cls: type[_S], options: Mapping[str, Any], *, where: str = "") -> _S:
        """These settings from a mapping of option names (a profile's ``options:``, ``-o`` flags); an unknown
        name is a ConfigurationError naming the ones this family takes (``where`` says where it came from)."""
        known = cls.names()
        for name in options:
            if name not in known:
                close = difflib.get_close_matches(str(name), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                prefix = f"{where}: " if where else ""
                raise ConfigurationError(
                    f"{prefix}{name!r} is not an option of {cls.family}{hint}; its options: {', '.join(known)}"
                )
        try:
            return cls(**options)
        except ConfigurationError as exc:
            if not where:
                raise
            raise ConfigurationError(f"{where}: {exc}") from None

    def options(self) -> dict[str, Any]:
        """The options set to something other than their default (what a profile would need to write)."""
        default = type(self)()
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(default, f.name)
        }

    def keywords(self) -> dict[str, Any]:
        """Every option, as the engine constructor's keywords."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)  # normalizing a field inside __post_init__ (the class is frozen)


class SettingsOwner:
    """An engine that keeps its options in ``settings``: once it is set (last in the constructor, after the
    attributes derived from it), assigning one of them as an attribute (``engine.mode = "chained"``) makes
    a new, checked settings value, so the two always agree."""

    settings: FamilySettings

    def __setattr__(self, name: str, value: Any) -> None:
        current = self.__dict__.get("settings")
        if current is not None and name in current.names() and getattr(current, name) is not value:
            object.__setattr__(self, "settings", replace(current, **{name: value}))
        object.__setattr__(self, name, value)


# -- the families -----------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ResponsesSettings(FamilySettings):
    """The options of :class:`~geppetto.providers.openai_responses.ResponsesEngine` (see it for each)."""

    family: ClassVar[str] = "openai-responses"
    checked_here: ClassVar[frozenset[str]] = frozenset({"compact_threshold"})

    mode: str | None = None
    store: bool = True
    instructions_mode: bool = False
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    reasoning_effort: str | None = None
    reasoning_summary: str | None = None
    text_format: dict[str, Any] | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    include: tuple[str, ...] = ()
    on_previous_not_found: str = "resend"
    validate_every: int | None = None
    delete_replaced_conversations: bool = False
    compact_threshold: int | None = None
    prompt_cache_key: PromptCacheKey = True
    prompt_cache_retention: str | None = None
    background: bool = False
    poll_interval: float = 1.0
    max_resumes: int = 5
    stream: bool = True
    prefix_policy: str = "drop"
    transport: Any = "http"

    def __post_init__(self) -> None:
        self._set("include", tuple(self.include or ()))
        super().__post_init__()
        _one_of("mode", self.mode, RESPONSES_MODES, none=True)
        from ._websocket import check_transport  # the socket module loads with the first engine that checks

        check_transport(self.transport, background=self.background)
        # a WebSocket holds store:false state on its connection, so chaining needs no stored responses there
        on_socket = self.transport not in (None, "http") and self.mode == "chained"
        if not self.store and self.mode in ("chained", "conversation") and not on_socket:
            raise ConfigurationError(
                f"mode={self.mode!r} needs the server to store responses; pass store=True or use mode='stateless'"
            )
        if self.on_previous_not_found not in ("resend", "raise"):
            raise ConfigurationError("on_previous_not_found must be 'resend' or 'raise'")
        _check_background(
            self,
            "response",
            "the server to store the response (it is generated and read back server-side); pass store=True or leave background off",
        )
        threshold = self.compact_threshold
        if threshold is not None and (
            not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1000
        ):
            raise ConfigurationError(
                f"compact_threshold={self.compact_threshold!r}: pass a number of tokens of at least 1000 (the API's "
                "minimum), or None for no in-request compaction"
            )
        if self.validate_every is not None and self.validate_every < 1:
            raise ConfigurationError("validate_every must be a positive number of requests (or None for never)")
        if self.reasoning_effort is not None and self.reasoning_effort not in REASONING_EFFORTS:
            raise ConfigurationError(
                f"reasoning_effort {self.reasoning_effort!r} is not one of {', '.join(REASONING_EFFORTS)}"
            )
        if self.reasoning_summary is not None and self.reasoning_summary not in REASONING_SUMMARIES:
            raise ConfigurationError(
                f"reasoning_summary {self.reasoning_summary!r} is not one of {', '.join(REASONING_SUMMARIES)}"
            )
        key = self.prompt_cache_key
        wrong = not (key is None or isinstance(key, bool) or callable(key))  # a string, or the wrong type
        if wrong and not (isinstance(key, str) and 0 < len(key) <= _MAX_CACHE_KEY):
            raise ConfigurationError(
                f"the engine gave prompt_cache_key {key!r}: pass a non-empty string of at most {_MAX_CACHE_KEY} "
                "characters, True (one key per session), or None (no key)"
            )
        _one_of("prompt_cache_retention", self.prompt_cache_retention, PROMPT_CACHE_RETENTIONS, none=True)
        choice = self.tool_choice
        if not (
            choice is None or (isinstance(choice, str) and choice) or (isinstance(choice, dict) and choice.get("type"))
        ):
            raise ConfigurationError(
                f"tool_choice {choice!r} is not usable; use 'auto', 'none', 'required', a tool name, or a "
                "Responses form such as {'type': 'function', 'name': 'get_weather'}"
            )
        _check_policy(self.prefix_policy)


@dataclass(frozen=True, kw_only=True)
class InteractionsSettings(FamilySettings):
    """The options of :class:`~geppetto.providers.gemini.InteractionsEngine` (see it for each)."""

    family: ClassVar[str] = "gemini-interactions"

    mode: str | None = None
    store: bool = True
    tool_choice: str | None = None
    builtin_tools: tuple[dict[str, Any], ...] = ()
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    thinking_level: str | None = None
    thinking_summaries: str | None = None
    reasoning_effort: str | None = None
    on_previous_not_found: str = "resend"
    background: bool = False
    max_resumes: int = 5
    poll_interval: float = 1.0
    stream: bool = True
    headers: dict[str, str] | None = None
    prefix_policy: str = "drop"

    def __post_init__(self) -> None:
        self._set("builtin_tools", tuple(dict(t) for t in self.builtin_tools or ()))
        super().__post_init__()
        _one_of("mode", self.mode, INTERACTIONS_MODES, none=True)
        if self.on_previous_not_found not in ("resend", "raise"):
            raise ConfigurationError("on_previous_not_found must be 'resend' or 'raise'")
        _check_background(self, "interaction", "the server to store the interaction; leave store=False out")
        effort = self.reasoning_effort
        if self.thinking_level is None and effort is not None and effort not in THINKING_LEVELS:
            raise ConfigurationError(
                f"reasoning_effort {effort!r} is not one of {', '.join(THINKING_LEVELS)}; or pass thinking_level"
            )
        _check_policy(self.prefix_policy)


@dataclass(frozen=True, kw_only=True)
class _StreamingSettings(FamilySettings):
    """What the Chat Completions, Claude and Gemini engines all take (their shared endpoint skeleton)."""

    tool_choice: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    headers: dict[str, str] | None = None
    stream: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        from ._streaming import check_tool_choice

        check_tool_choice(self.tool_choice)


@dataclass(frozen=True, kw_only=True)
class ChatSettings(_StreamingSettings):
    """The options of :class:`~geppetto.providers.openai_chat.ChatEngine` (see it for each)."""

    family: ClassVar[str] = "openai-chat"

    reasoning_effort: str | None = None
    system_role: str = "system"
    stream_usage: bool = True
    thinking: bool | None = None


@dataclass(frozen=True, kw_only=True)
class ClaudeSettings(_StreamingSettings):
    """The options of :class:`~geppetto.providers.anthropic.ClaudeEngine` (see it for each)."""

    family: ClassVar[str] = "anthropic"

    thinking_budget: int | None = None
    reasoning_effort: str | None = None
    prompt_cache: bool | str = "auto"
    builtin_tools: tuple[dict[str, Any], ...] = ()
    prefix_policy: str = "drop"
    cache_diagnostics: bool = False

    def __post_init__(self) -> None:
        self._set("builtin_tools", tuple(dict(t) for t in self.builtin_tools or ()))
        super().__post_init__()
        from ._streaming import budget_for_effort

        budget_for_effort(self.thinking_budget, self.reasoning_effort)  # refuses an unknown effort
        if self.prompt_cache not in (True, False, "auto"):
            raise ConfigurationError(f"prompt_cache={self.prompt_cache!r}: use 'auto' (default), True or False")
        _check_policy(self.prefix_policy)


@dataclass(frozen=True, kw_only=True)
class GeminiSettings(_StreamingSettings):
    """The options of :class:`~geppetto.providers.gemini.GeminiEngine` (see it for each)."""

    family: ClassVar[str] = "gemini"

    thinking_budget: int | None = None
    reasoning_effort: str | None = None
    include_thoughts: bool | None = None
    builtin_tools: tuple[dict[str, Any], ...] = ()
    prefix_policy: str = "drop"

    def __post_init__(self) -> None:
        self._set("builtin_tools", tuple(dict(t) for t in self.builtin_tools or ()))
        super().__post_init__()
        from ._streaming import budget_for_effort

        budget_for_effort(self.thinking_budget, self.reasoning_effort)  # refuses an unknown effort
        _check_policy(self.prefix_policy)


SETTINGS: dict[str, type[FamilySettings]] = {
    cls.family: cls for cls in (ResponsesSettings, ChatSettings, ClaudeSettings, GeminiSettings, InteractionsSettings)
}
"""Profile ``provider`` name -> its family's settings class."""


# -- checks ---------------------------------------------------------------------------------------------
def _one_of(name: str, value: Any, allowed: tuple[str, ...], *, none: bool) -> None:
    if (value is None and none) or value in allowed:
        return
    raise ConfigurationError(f"unknown {name} {value!r}; use one of {', '.join(allowed)}")


def _check_policy(policy: str) -> None:
    from ._prefix_guard import check_policy

    check_policy(policy)


def _check_background(s: ResponsesSettings | InteractionsSettings, what: str, needs_store: str) -> None:
    if s.background and not s.store:
        raise ConfigurationError(f"background=True needs {needs_store}")
    if not 0 < s.poll_interval < float("inf"):
        raise ConfigurationError(f"poll_interval must be a positive number of seconds, got {s.poll_interval!r}")
    if s.max_resumes < 0:
        raise ConfigurationError(f"max_resumes must be 0 or more, got {s.max_resumes!r}")
    if s.background and not s.stream:
        raise ConfigurationError(
            f"background=True streams the {what} (so a broken stream can be resumed); leave stream=False out"
        )


_WORDS = {
    bool: "true or false",
    int: "a whole number",
    float: "a number",
    str: "a string",
    dict: "a mapping",
    tuple: "a list",
}


_ACCEPTED: dict[type, dict[str, tuple[type, ...] | None]] = {}


def _accepted(cls: type[FamilySettings]) -> dict[str, tuple[type, ...] | None]:
    """Per field, the plain types its annotation allows (None: not checked here, e.g. a callable)."""
    if cls not in _ACCEPTED:
        hints = typing.get_type_hints(cls, globals())
        _ACCEPTED[cls] = {f.name: _plain(hints[f.name]) for f in fields(cls)}
    return _ACCEPTED[cls]


def _plain(hint: Any) -> tuple[type, ...] | None:
    parts = typing.get_args(hint) if typing.get_origin(hint) in (Union, types.UnionType) else (hint,)
    found: list[type] = []
    for part in parts:
        origin = typing.get_origin(part) or part
        if origin is type(None):
            found.append(type(None))
        elif origin in (bool, int, float, str, dict, tuple):
            found.append(origin)
        else:
            return None  # a callable or the like: its own check looks at it
    return tuple(found)


def _check_type(cls: type[FamilySettings], name: str, value: Any) -> None:
    """A value of the wrong type (a YAML typo, say) fails here, naming what to write, not as a provider 400."""
    accepted = _accepted(cls).get(name)
    if accepted is None:
        return
    if isinstance(value, bool):
        ok = bool in accepted
    elif isinstance(value, int):
        ok = int in accepted or float in accepted
    else:
        ok = isinstance(value, accepted)
    if not ok:
        wanted = " or ".join(_WORDS.get(t, "null") for t in accepted)
        raise ConfigurationError(f"{name}={value!r}: write {wanted}")
