"""Claude's code-execution container, kept from the answer and named again on the follow-up.

An answer that ran code says which sandbox it ran in: ``container: {"id", "expires_at"}`` on the whole
Message, on ``message_delta.delta`` in a stream. The files it wrote and the variables it set live there
until it expires, so the next request names it again (``container: "<id>"``) and the model finds its
work where it left it. The container is kept on the answer's blocks (``anthropic.container@v1``), so a
stored and reloaded Turn keeps it too; a request names the newest one the Turn holds while it has not
expired and a code-execution tool is offered (without one there is nothing to run in it).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from ...turns import Block, Turn, block_meta_key

__all__ = ["CONTAINER", "container_of", "keep_container", "name_container"]

_now = time.time

CONTAINER = block_meta_key("anthropic", "container", 1, dict)
"""The container the answer these blocks came from ran code in: ``{"id", "expires_at"}`` as Claude sent it."""


def container_of(message: Any) -> dict[str, Any] | None:
    """The ``container`` object of a Message (or of a ``message_delta``'s delta), when it names one."""
    found = message.get("container") if isinstance(message, dict) else None
    if isinstance(found, dict) and isinstance(found.get("id"), str) and found["id"]:
        return dict(found)
    return None


def keep_container(new: Iterable[Block], container: dict[str, Any] | None) -> None:
    """Put the answer's ``container`` on its blocks ``new``."""
    if container is None:
        return
    for block in new:
        CONTAINER.set(block.metadata, dict(container))


def _expired(container: dict[str, Any], now: float) -> bool:
    stamp = container.get("expires_at")
    if not isinstance(stamp, str):
        return False  # no expiry said: the service decides
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return False
    return when <= now


def _runs_code(tools: Any) -> bool:
    return any(isinstance(t, dict) and str(t.get("type") or "").startswith("code_execution") for t in tools or [])


def name_container(turn: Turn, body: dict[str, Any], now: float | None = None) -> None:
    """Name the Turn's newest unexpired container in ``body`` when it offers a code-execution tool (a
    ``container`` the caller put in the body already stays)."""
    if "container" in body or not _runs_code(body.get("tools")):
        return
    for block in reversed(turn.blocks):
        container = CONTAINER.get(block.metadata)
        if container:
            if not _expired(container, _now() if now is None else now):
                body["container"] = container["id"]
            return
