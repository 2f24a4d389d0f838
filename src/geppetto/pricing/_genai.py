"""The default price table: the ``genai-prices`` package (the ``geppetto[prices]`` extra), read lazily."""

from __future__ import annotations

import logging
from typing import Any

from ..events import Usage
from ._cost import Rates

__all__ = ["GenaiPrices"]

log = logging.getLogger("geppetto.pricing")

_PROVIDER_IDS = {"openai": "openai", "anthropic": "anthropic", "gemini": "google", "gemini-interactions": "google"}
"""geppetto's provider names as genai-prices names them; others (the Chat Completions engine, which talks
to many servers) let genai-prices find the provider from the model name."""


class GenaiPrices:
    """Rates from the ``genai-prices`` database (prices as of the request's time; a tier picked by the prompt's
    size). Install it with ``pip install 'geppetto[prices]'``; without it every request is unpriced."""

    def __init__(self) -> None:
        self._snapshot: Any = None
        self._missing = False

    def _db(self) -> Any:
        if self._snapshot is None and not self._missing:
            try:
                from genai_prices import data_snapshot
            except ImportError:
                self._missing = True
                log.info("genai-prices is not installed (pip install 'geppetto[prices]'): requests are unpriced")
                return None
            self._snapshot = data_snapshot.get_snapshot()
        return self._snapshot

    def rates(self, provider: str, model: str, usage: Usage) -> Rates | None:
        db = self._db()
        if db is None:
            return None
        try:
            _, info = db.find_provider_model(model, None, _PROVIDER_IDS.get(provider), None)
        except LookupError:
            return None
        import datetime

        prices = info.get_prices(datetime.datetime.now(tz=datetime.UTC))

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
