"""The default price table: the ``genai-prices`` package (the ``geppetto[prices]`` extra), read lazily."""

from __future__ import annotations

import datetime
import logging
from typing import Any

from ..events import Usage
from ._cost import Rates

__all__ = ["GenaiPrices"]

log = logging.getLogger("geppetto.pricing")

_PROVIDER_IDS = {"openai": "openai", "anthropic": "anthropic", "gemini": "google", "gemini-interactions": "google"}
"""geppetto's provider names as genai-prices names them; others (the Chat Completions engine, which talks
to many servers) let genai-prices find the provider from the model name."""

_CACHED_MODELS = 4096
"""How many (provider, model) lookups a table remembers; past that it starts again (a process seldom talks to
more models, and a server fed model names by its clients must not grow without bound)."""

_PRICE_FIELDS = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")


class _Model:
    """What a lookup found for one (provider, model): the model's entry, and its :class:`Rates` when they
    depend neither on the request's time nor on the prompt's size (most models), so pricing a request costs
    one dict lookup."""

    __slots__ = ("fixed", "info")

    def __init__(self, info: Any) -> None:
        self.info = info
        self.fixed: Rates | None = None
        # a plain price (not a list of prices by date) with no tier in it is the same for every request
        prices = getattr(info, "prices", None)
        dated = prices is None or isinstance(prices, list | tuple)
        if not dated and not any(hasattr(getattr(prices, f, None), "tiers") for f in _PRICE_FIELDS):
            self.fixed = _rates(prices, Usage())

    def rates(self, usage: Usage) -> Rates | None:
        if self.fixed is not None:
            return self.fixed
        return _rates(self.info.get_prices(datetime.datetime.now(tz=datetime.UTC)), usage)


def _rates(prices: Any, usage: Usage) -> Rates | None:
    def rate(name: str) -> float | None:
        value = getattr(prices, name, None)
        if value is None:
            return None
        if hasattr(value, "tiers"):  # TieredPrices: the whole prompt pays the tier its size reaches
            applied = value.base
            for tier in reversed(value.tiers):
                if usage.input_tokens > tier.start:
                    applied = tier.price
                    break
            value = applied
        return float(value)

    inp, out = rate("input_mtok"), rate("output_mtok")
    if inp is None or out is None:
        return None
    return Rates(input=inp, output=out, cached_input=rate("cache_read_mtok"), cache_write=rate("cache_write_mtok"))


class GenaiPrices:
    """Rates from the ``genai-prices`` database (prices as of the request's time; a tier picked by the prompt's
    size). Install it with ``pip install 'geppetto[prices]'``; without it every request is unpriced.

    Each (provider, model) is looked up once, models the database does not know included, so pricing a
    response costs the same whatever the size of the database; a new snapshot of it (genai-prices'
    ``UpdatePrices`` or ``set_custom_snapshot``) starts the lookups again."""

    def __init__(self) -> None:
        self._snapshot: Any = None
        self._source: Any = None
        self._missing = False
        self._models: dict[tuple[str, str], _Model | None] = {}

    def _db(self) -> Any:
        if self._source is None:
            if self._missing:
                return None
            try:
                from genai_prices import data_snapshot
            except ImportError:
                self._missing = True
                log.info("genai-prices is not installed (pip install 'geppetto[prices]'): requests are unpriced")
                return None
            self._source = data_snapshot
        snapshot = self._source.get_snapshot()
        if snapshot is not self._snapshot:
            self._snapshot = snapshot
            self._models = {}
        return snapshot

    def rates(self, provider: str, model: str, usage: Usage) -> Rates | None:
        db = self._db()
        if db is None:
            return None
        key = (provider, model)
        try:
            found = self._models[key]
        except KeyError:
            found = self._models[key] = self._lookup(db, provider, model)
        return None if found is None else found.rates(usage)

    def _lookup(self, db: Any, provider: str, model: str) -> _Model | None:
        if len(self._models) >= _CACHED_MODELS:
            self._models = {}
        try:
            _, info = db.find_provider_model(model, None, _PROVIDER_IDS.get(provider), None)
        except LookupError:
            return None
        return _Model(info)
