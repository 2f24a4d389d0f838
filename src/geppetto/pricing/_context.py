"""The price table in force: set for a block with :func:`use_prices`, else the default."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from ._cost import PriceTable
from ._genai import GenaiPrices

__all__ = ["current_prices", "default_prices", "use_prices"]

_DEFAULT: PriceTable | None = None
_CURRENT: contextvars.ContextVar[PriceTable | None] = contextvars.ContextVar("geppetto_prices", default=None)


def default_prices() -> PriceTable:
    """The table used when none is set: :class:`GenaiPrices` (one shared instance)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = GenaiPrices()
    return _DEFAULT


def current_prices() -> PriceTable:
    """The table in force here: the one :func:`use_prices` set, else :func:`default_prices`."""
    return _CURRENT.get() or default_prices()


@contextlib.contextmanager
def use_prices(table: PriceTable | None) -> Iterator[None]:
    """Price the requests made inside the block with ``table`` (None: the default)."""
    token = _CURRENT.set(table)
    try:
        yield
    finally:
        _CURRENT.reset(token)
