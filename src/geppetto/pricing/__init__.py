"""Prices and cost: what each request cost, from the usage its provider reported.

``price(usage, provider, model, table)`` -> :class:`Cost` or None (unpriced). The table in force is the one
:func:`use_prices` set (a :class:`~geppetto.Session` sets its ``prices=``), else :func:`default_prices`:
``genai-prices`` when installed (``pip install 'geppetto[prices]'``). Engines record each request's cost in
the turn (:data:`TURN_META_COST`), on the ``final`` event (``metadata.cost``) and on the response's last block
(:data:`BLOCK_META_USAGE`). See docs/cost.md.
"""

from __future__ import annotations

from ._context import current_prices, default_prices, use_prices
from ._cost import Cost, PriceTable, Rates, StaticPrices, price
from ._genai import GenaiPrices
from ._record import BLOCK_META_USAGE, TURN_META_COST, record_usage

__all__ = [
    "BLOCK_META_USAGE",
    "TURN_META_COST",
    "Cost",
    "GenaiPrices",
    "PriceTable",
    "Rates",
    "StaticPrices",
    "current_prices",
    "default_prices",
    "price",
    "record_usage",
    "use_prices",
]
