"""What a request cost: per-million rates, the cost split by kind of token, and the tables that hold rates.

A :class:`PriceTable` answers ``rates(provider, model, usage)`` with the :class:`Rates` that apply to that
request (``usage`` is given so a table can pick a tier by the prompt's size), or None when it does not know
the model. :func:`price` turns a request's :class:`~geppetto.events.Usage` into a :class:`Cost`; an unknown
model or a request without usage is *unpriced* (None), never zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..events import Usage

__all__ = ["Cost", "PriceTable", "Rates", "StaticPrices", "price"]

_MTOK = 1_000_000


@dataclass(frozen=True)
class Rates:
    """USD per million tokens. ``cached_input`` (a cache read) and ``cache_write`` default to ``input``;
    ``reasoning`` defaults to ``output`` (every provider bills thinking as output)."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    reasoning: float | None = None

    def cost(self, usage: Usage) -> Cost:
        """The cost of ``usage`` at these rates. geppetto's ``input_tokens`` include cache reads and writes and
        ``output_tokens`` include reasoning, so the uncached input and the visible output are what is left."""
        read, write = usage.cached_tokens, usage.cache_write_tokens
        uncached = max(usage.input_tokens - read - write, 0)
        reasoning = min(usage.reasoning_tokens, usage.output_tokens)
        return Cost(
            input=uncached * self.input / _MTOK,
            cached_input=read * _or(self.cached_input, self.input) / _MTOK,
            cache_write=write * _or(self.cache_write, self.input) / _MTOK,
            output=(usage.output_tokens - reasoning) * self.output / _MTOK,
            reasoning=reasoning * _or(self.reasoning, self.output) / _MTOK,
        )

    def uncached_total(self, usage: Usage) -> float:
        """USD of ``usage``'s tokens had nothing been read from or written to a cache: every input token at
        ``input``, the output as in :meth:`cost` (the ``uncached`` figure of a recorded cost)."""
        reasoning = min(usage.reasoning_tokens, usage.output_tokens)
        return (
            usage.input_tokens * self.input / _MTOK
            + (usage.output_tokens - reasoning) * self.output / _MTOK
            + reasoning * _or(self.reasoning, self.output) / _MTOK
        )


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


@dataclass(frozen=True)
class Cost:
    """USD of one request (or a sum of them), split by kind of token: uncached ``input``, ``cached_input``
    (cache reads), ``cache_write``, visible ``output`` and ``reasoning``."""

    input: float = 0.0
    cached_input: float = 0.0
    cache_write: float = 0.0
    output: float = 0.0
    reasoning: float = 0.0

    @property
    def total(self) -> float:
        return self.input + self.cached_input + self.cache_write + self.output + self.reasoning

    def __add__(self, other: Cost) -> Cost:
        return Cost(**{k: getattr(self, k) + getattr(other, k) for k in self.__dataclass_fields__})

    def to_dict(self) -> dict[str, float]:
        return {
            "input": self.input,
            "cached_input": self.cached_input,
            "cache_write": self.cache_write,
            "output": self.output,
            "reasoning": self.reasoning,
            "total": self.total,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cost:
        return cls(**{k: float(data.get(k) or 0.0) for k in cls.__dataclass_fields__})


@runtime_checkable
class PriceTable(Protocol):
    """Where rates come from: ``rates(provider, model, usage)`` is the :class:`Rates` of that request, or None
    when the table does not know the model."""

    def rates(self, provider: str, model: str, usage: Usage) -> Rates | None: ...


class StaticPrices:
    """A table of your own: ``{model: Rates}`` (or ``{"provider:model": Rates}`` for one provider's model).
    ``fallback`` is asked for the models it does not hold (e.g. :func:`~geppetto.pricing.default_prices`)."""

    def __init__(self, rates: Mapping[str, Rates | Mapping[str, float]], fallback: PriceTable | None = None) -> None:
        self.table = {name: r if isinstance(r, Rates) else Rates(**r) for name, r in rates.items()}
        self.fallback = fallback

    def rates(self, provider: str, model: str, usage: Usage) -> Rates | None:
        found = self.table.get(f"{provider}:{model}") or self.table.get(model)
        if found is None and self.fallback is not None:
            return self.fallback.rates(provider, model, usage)
        return found


def price(usage: Usage | None, provider: str, model: str, table: PriceTable | None) -> Cost | None:
    """The cost of one request, or None (unpriced) when there is no usage, no table or the table does not
    know ``model``."""
    if usage is None or table is None or not model:
        return None
    rates = table.rates(provider, model, usage)
    return None if rates is None else rates.cost(usage)
