"""How the CLI shows what requests used and cost: one line per inference or session, cells for tables."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from .._extras import install_hint

__all__ = ["format_cost", "unpriced_hint", "usage_line"]


def format_cost(cost: Any) -> str:
    """USD with enough digits for a cheap request; ``unpriced`` for None (never shown as zero)."""
    if cost is None:
        return "unpriced"
    value = float(cost)
    return f"${value:.4f}" if value >= 0.01 else f"${value:.6f}"


def unpriced_hint() -> str:
    """Why a request shows ``unpriced``, and what prices it: the ``prices`` extra when genai-prices is missing."""
    if importlib.util.find_spec("genai_prices") is None:
        return f"unpriced: genai-prices is not installed ({install_hint('prices')})"
    return "unpriced: genai-prices has no price for this model"


def usage_line(usage: Mapping[str, Any]) -> str:
    """``3 requests · 1,234 in (1,000 cached, 0 written) · 56 out (12 reasoning) · $0.001234`` from a
    ``SessionUsage.to_dict()``."""
    requests = int(usage.get("requests", 0))
    parts = [
        f"{requests} request{'s' if requests != 1 else ''}",
        f"{int(usage.get('input_tokens', 0)):,} in ({int(usage.get('cached_tokens', 0)):,} cached, "
        f"{int(usage.get('cache_write_tokens', 0)):,} written)",
        f"{int(usage.get('output_tokens', 0)):,} out ({int(usage.get('reasoning_tokens', 0)):,} reasoning)",
    ]
    if int(usage.get("tool_calls", 0)):
        calls = int(usage["tool_calls"])
        parts.append(f"{calls} tool call{'s' if calls != 1 else ''}")
    parts.append(format_cost(usage.get("cost")))
    if usage.get("cost") is None and int(usage.get("unpriced_requests", 0)) and usage.get("priced_cost"):
        parts[-1] += f" (priced part ${float(usage['priced_cost']):.6f})"
    return " · ".join(parts)
