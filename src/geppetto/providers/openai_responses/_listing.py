"""Reading a server's stored items and reducing them to what the model reads (validation and repair)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from geppetto._json import parse_json

from ._items import content_text

__all__ = ["Reader", "list_items", "visible"]


class Reader(Protocol):
    """What reading a list needs of an engine's ``Api``."""

    async def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any: ...


_PAGE = 100


def _args(raw: Any) -> Any:
    try:
        return parse_json(raw) if isinstance(raw, str) else raw
    except ValueError:
        return raw


def visible(item: dict[str, Any]) -> tuple[Any, ...]:
    """An input or stored item reduced to what the model reads (server ids, statuses and content shapes
    dropped; reasoning, references and items geppetto does not model count by id)."""
    kind = item.get("type") or ("message" if "role" in item else "item_reference")
    if kind == "message":
        return ("message", item.get("role"), content_text(item.get("content")))
    if kind == "function_call":
        return ("function_call", item.get("call_id"), item.get("name"), _args(item.get("arguments")))
    if kind == "function_call_output":
        return ("function_call_output", item.get("call_id"), content_text(item.get("output")))
    if kind in ("reasoning", "item_reference"):
        return ("reasoning", item.get("id"))
    return (kind, item.get("id"))


async def list_items(api: Reader, path: str) -> tuple[list[dict[str, Any]], int]:
    """Every item of a list endpoint (``order=asc``), page by page, and the number of reads it took."""
    items: list[dict[str, Any]] = []
    after: str | None = None
    reads = 0
    while True:
        params: dict[str, Any] = {"order": "asc", "limit": _PAGE}
        if after:
            params["after"] = after
        page = await api.get(path, params)
        reads += 1
        data = page.get("data") if isinstance(page, dict) else None
        items.extend(i for i in data or [] if isinstance(i, dict))
        if not (isinstance(page, dict) and page.get("has_more") and page.get("last_id")):
            return items, reads
        after = str(page["last_id"])
