"""A session's usage totals and limits: every request counted and priced, limits checked before each one.

The :class:`UsageMeter` is the innermost middleware of a :class:`~geppetto.Session` (inside the tool loop),
so it sees each provider request: before it, the limits are checked (the prompt's size from the engine's
``count_tokens`` when a token limit is set); after it, the usage and cost the engine recorded in the turn
(``TURN_META_USAGE``, ``TURN_META_COST``) are added to the totals, and the totals written to the turn
(:data:`TURN_META_SESSION_USAGE`), so a stored snapshot keeps what its session had spent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .._exceptions import UsageError, UsageLimitExceeded
from ..engine import Engine, Handler
from ..events import Usage
from ..pricing import TURN_META_COST, current_prices
from ..turns import TURN_META_USAGE, BlockKind, Turn, turn_meta_key

__all__ = [
    "TURN_META_INFERENCE_USAGE",
    "TURN_META_SESSION_USAGE",
    "TURN_META_STOPPED_BY_LIMIT",
    "SessionUsage",
    "UsageLimits",
    "UsageMeter",
]

TURN_META_SESSION_USAGE = turn_meta_key("geppetto", "session_usage", 1, dict)
"""The session's totals (``SessionUsage.to_dict()``) after the last request of the inference that made the turn."""
TURN_META_INFERENCE_USAGE = turn_meta_key("geppetto", "inference_usage", 1, dict)
"""What the inference that made the turn used (``SessionUsage.to_dict()``: its requests only)."""
TURN_META_STOPPED_BY_LIMIT = turn_meta_key("geppetto", "stopped_by_limit", 1, dict)
"""On a snapshot saved when a usage limit stopped its inference mid tool loop: ``limit``, ``value``, ``maximum``
and the ``message`` the caller got (the Turn keeps the work done so far)."""


@dataclass
class SessionUsage:
    """Totals over requests. ``cost`` (USD) is None as soon as one request is unpriced (unknown model, no
    usage reported): a partial sum would read as the whole; ``priced_cost`` is that partial sum."""

    requests: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    priced_cost: float = 0.0
    unpriced_requests: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cost(self) -> float | None:
        return None if self.unpriced_requests else self.priced_cost

    def add(self, usage: Usage | None, cost: float | None, tool_calls: int = 0) -> None:
        """Count one request: its usage (None: none reported) and cost (None: unpriced)."""
        self.requests += 1
        self.tool_calls += tool_calls
        if usage is not None:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.cached_tokens += usage.cached_tokens
            self.cache_write_tokens += usage.cache_write_tokens
            self.reasoning_tokens += usage.reasoning_tokens
        if cost is None:
            self.unpriced_requests += 1
        else:
            self.priced_cost += cost

    def copy(self) -> SessionUsage:
        return dataclasses.replace(self)

    def __sub__(self, other: SessionUsage) -> SessionUsage:
        return SessionUsage(
            **{f.name: getattr(self, f.name) - getattr(other, f.name) for f in dataclasses.fields(self)}
        )

    def to_dict(self) -> dict[str, Any]:
        # every field is a number: dataclasses.asdict's recursive copy would only cost time
        out: dict[str, Any] = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["total_tokens"] = self.total_tokens
        out["cost"] = self.cost
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionUsage:
        names = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {
            k: (float(v) if k == "priced_cost" else int(v)) for k, v in data.items() if k in names
        }
        return cls(**values)


_LIMITS = ("max_requests", "max_tool_calls", "max_input_tokens", "max_output_tokens", "max_total_tokens", "max_cost")


@dataclass(frozen=True)
class UsageLimits:
    """Bounds on what a session spends, checked before each request (see docs/cost.md).

    ``per="session"`` (default) counts every request of the session (a restored one included, from the store);
    ``per="inference"`` counts each ``run``/``start_inference`` anew. ``max_cost`` is in USD; with it, an
    unpriced request raises unless ``allow_unpriced=True`` (then only the priced requests count).
    """

    max_requests: int | None = None
    max_tool_calls: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost: float | None = None
    allow_unpriced: bool = False
    per: Literal["session", "inference"] = "session"

    def __post_init__(self) -> None:
        for name in _LIMITS:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
                raise UsageError(f"UsageLimits({name}={value!r}): give a number of 0 or more, or None for no limit")
        if self.per not in ("session", "inference"):
            raise UsageError(f"UsageLimits(per={self.per!r}): use 'session' or 'inference'")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UsageLimits:
        """From a profile's ``limits:`` mapping; an unknown key is a :class:`~geppetto.UsageError` naming the known."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UsageError(f"unknown usage limit {', '.join(unknown)}: use {', '.join(sorted(known))}")
        return cls(**dict(data))

    @classmethod
    def parse(cls, text: str) -> UsageLimits:
        """From ``max_requests=20,max_cost=1.5`` (``geppetto serve --limits``); ``allow_unpriced=true`` and
        ``per=inference`` are read too."""
        values: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, sep, raw = part.partition("=")
            name, raw = name.strip(), raw.strip()
            if not sep or not raw:
                raise UsageError(f"usage limit {part!r}: write NAME=VALUE, e.g. max_requests=20,max_cost=1.5")
            if name == "per":
                values[name] = raw
            elif name == "allow_unpriced":
                values[name] = raw.lower() in ("1", "true", "yes")
            else:
                try:
                    values[name] = float(raw) if name == "max_cost" else int(raw)
                except ValueError:
                    raise UsageError(f"usage limit {name}={raw!r}: give a number") from None
        return cls.from_dict(values)

    @property
    def counts_tokens(self) -> bool:
        return self.max_input_tokens is not None or self.max_total_tokens is not None


class UsageMeter:
    """Counts and prices every request of a session and enforces its :class:`UsageLimits`."""

    def __init__(self, limits: UsageLimits | None = None, totals: SessionUsage | None = None) -> None:
        self.limits = limits
        self.totals = totals or SessionUsage()
        self._start = self.totals.copy()
        self.reported = False
        """Whether a request since :meth:`begin` reported usage (an engine that reports none, like a scripted
        one in tests, leaves the turn's metadata as it was)."""
        self.engine: Engine | None = None
        """The engine whose ``count_tokens``, ``provider`` and ``model`` the checks read (the session sets it)."""

    def attach(self, engine: Engine) -> None:
        """Read ``count_tokens``/``provider``/``model`` from ``engine``, or from the engine a middleware wraps."""
        inner: Any = engine
        while not hasattr(inner, "count_tokens") and getattr(inner, "engine", None) is not None:
            inner = inner.engine
        self.engine = inner

    def begin(self) -> SessionUsage:
        """Mark an inference's start (for ``per="inference"`` limits); returns the totals so far."""
        self._start = self.totals.copy()
        self.reported = False
        return self._start

    def middleware(self, next_handler: Handler) -> Handler:
        async def handler(turn: Turn) -> Turn:
            if self.limits is not None:
                await self._check(turn)
            TURN_META_USAGE.delete(turn.metadata)
            TURN_META_COST.delete(turn.metadata)
            before = len(turn.blocks)
            out = await next_handler(turn)
            raw, cost = TURN_META_USAGE.get(out.metadata), TURN_META_COST.get(out.metadata)
            blocks = out.blocks
            calls = sum(1 for i in range(before, len(blocks)) if blocks[i].kind is BlockKind.TOOL_CALL)
            self.totals.add(
                Usage.from_dict(raw) if raw is not None else None, None if cost is None else cost["total"], calls
            )
            if raw is not None:
                self.reported = True
                TURN_META_SESSION_USAGE.set(out.metadata, self.totals.to_dict())
            if self.limits is not None and self.limits.max_tool_calls is not None:
                self._tool_calls(out, self.limits.max_tool_calls)
            return out

        return handler

    def reached(self) -> UsageLimitExceeded | None:
        """The error the next request would get whatever it sends, when a session-wide limit is already reached
        by the totals (``max_requests``, ``max_output_tokens``, ``max_cost``, ``max_tool_calls`` once passed);
        None otherwise. A prompt can be
        refused with it before anything starts."""
        limits = self.limits
        if limits is None or limits.per != "session":
            return None
        try:
            for check in (self._check_requests, self._check_output):
                check(None, limits, self.totals)
            if limits.max_cost is not None and self.totals.priced_cost >= limits.max_cost:
                self._raise(None, "max_cost", self.totals.priced_cost, limits.max_cost, "USD spent")
        except UsageLimitExceeded as exc:
            return exc
        return None

    def _check_requests(self, turn: Turn | None, limits: UsageLimits, used: SessionUsage) -> None:
        if limits.max_requests is not None and used.requests >= limits.max_requests:
            what = f"{used.requests} request{'s' if used.requests != 1 else ''} sent, another would pass it"
            self._raise(turn, "max_requests", used.requests, limits.max_requests, what)

    def _check_output(self, turn: Turn | None, limits: UsageLimits, used: SessionUsage) -> None:
        if limits.max_output_tokens is not None and used.output_tokens >= limits.max_output_tokens:
            self._raise(turn, "max_output_tokens", used.output_tokens, limits.max_output_tokens, "output tokens used")
        if limits.max_tool_calls is not None and used.tool_calls > limits.max_tool_calls:
            # passed already (by calls that were asked for and not run): no request until it is raised
            self._raise(
                turn,
                "max_tool_calls",
                used.tool_calls,
                limits.max_tool_calls,
                f"{used.tool_calls} tool calls asked for",
            )

    def _used(self) -> SessionUsage:
        assert self.limits is not None
        return self.totals - self._start if self.limits.per == "inference" else self.totals

    def _raise(self, turn: Turn | None, limit: str, value: float, maximum: float, what: str) -> None:
        assert self.limits is not None
        scope = "this inference" if self.limits.per == "inference" else "this session"
        raise UsageLimitExceeded(
            f"usage limit {limit}={maximum:g} reached in {scope}: {what}; the request was not sent and "
            f"the Turn (error.turn) keeps the work done so far. Raise the limit (session.limits = "
            f"UsageLimits({limit}=...)) or start a new session to go on",
            limit=limit,
            value=value,
            maximum=maximum,
            usage=self.totals.copy(),
            turn=turn,
        )

    def _tool_calls(self, turn: Turn, maximum: int) -> None:
        used = self._used().tool_calls
        if used > maximum:
            self._raise(
                turn, "max_tool_calls", used, maximum, f"the model asked for {used} tool calls; none of the last ran"
            )

    async def _check(self, turn: Turn) -> None:
        limits, used = self.limits, self._used()
        assert limits is not None
        self._check_requests(turn, limits, used)
        self._check_output(turn, limits, used)
        if limits.max_cost is not None:
            self._check_cost(turn, limits, used)
        if limits.counts_tokens:
            counted, how = await self._count(turn)
            if limits.max_input_tokens is not None and used.input_tokens + counted > limits.max_input_tokens:
                what = f"{used.input_tokens} input tokens used and the next prompt is {counted} ({how})"
                self._raise(turn, "max_input_tokens", used.input_tokens + counted, limits.max_input_tokens, what)
            if limits.max_total_tokens is not None and used.total_tokens + counted > limits.max_total_tokens:
                what = f"{used.total_tokens} tokens used and the next prompt is {counted} ({how})"
                self._raise(turn, "max_total_tokens", used.total_tokens + counted, limits.max_total_tokens, what)

    def _check_cost(self, turn: Turn, limits: UsageLimits, used: SessionUsage) -> None:
        assert limits.max_cost is not None
        if not limits.allow_unpriced:
            if used.unpriced_requests:
                n = used.unpriced_requests
                self._raise_unpriced(turn, f"{n} request{'s' if n != 1 else ''} could not be priced")
            engine = self.engine
            provider, model = getattr(engine, "provider", None), getattr(engine, "model", None)
            known = isinstance(provider, str) and isinstance(model, str)
            if known and current_prices().rates(str(provider), str(model), Usage()) is None:
                self._raise_unpriced(turn, f"the price table has no price for {provider} model {model!r}")
        if used.priced_cost >= limits.max_cost:
            self._raise(turn, "max_cost", used.priced_cost, limits.max_cost, f"USD {used.priced_cost:.6f} spent")

    def _raise_unpriced(self, turn: Turn, why: str) -> None:
        assert self.limits is not None and self.limits.max_cost is not None
        raise UsageLimitExceeded(
            f"usage limit max_cost={self.limits.max_cost:g} cannot be enforced: {why}; the request was not sent. "
            "Price the model (Session(..., prices=StaticPrices({model: Rates(input=..., output=...)})), install "
            "genai-prices (pip install 'geppetto[prices]'), or count only priced requests with "
            "UsageLimits(max_cost=..., allow_unpriced=True)",
            limit="max_cost",
            value=float("nan"),
            maximum=self.limits.max_cost,
            usage=self.totals.copy(),
            turn=turn,
        )

    async def _count(self, turn: Turn) -> tuple[int, str]:
        """The tokens of the prompt ``turn`` makes: the provider's count where the engine has one, else an
        estimate (four characters a token)."""
        count = getattr(self.engine, "count_tokens", None)
        if count is not None:
            counted = int(await count(turn))
            estimated = bool(getattr(self.engine, "count_is_estimate", False))
            return counted, "estimated" if estimated else "counted by the provider"
        from ..middleware.compaction import estimate_tokens

        return estimate_tokens(list(turn.blocks)), "estimated"
