"""Claude's cache diagnostics (``diagnostics.previous_message_id``), from the simulator's own held requests.

A request carrying a ``diagnostics`` object opts in: the simulator keeps a fingerprint of it (its model,
the digests of its tools and system prompt, and one digest per message, ``cache_control`` marks left out
since they move between requests) under the answer's id. A request naming an earlier answer in
``diagnostics.previous_message_id`` is compared with that fingerprint in cache order (model, tools,
system, then whether the earlier messages are still the new request's first ones), and the answer carries
``diagnostics: {"cache_miss_reason": {"type": "<part>_changed", "cache_missed_input_tokens": N}}`` at the
first divergence, ``{"cache_miss_reason": {"type": "previous_message_not_found"}}`` for an id it holds no
fingerprint of, ``{"type": "unavailable"}`` when only other prompt-shaping fields (``thinking``,
``tool_choice``) changed, or ``diagnostics: null`` when nothing diverged (the service's shapes).

:meth:`~geppetto.simulator.Simulator.plant_divergence` changes a held fingerprint, so a test can make
the server see a difference the client did not make.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ._state import SimState
from ._tokens import ITEM_OVERHEAD, count_value

__all__ = ["PARTS", "diagnose", "plant", "remember"]

PARTS = ("model", "tools", "system", "messages")
"""What a fingerprint holds, in the order a comparison reads it (the prompt cache's order after the model)."""

_SETTINGS = ("thinking", "tool_choice")
"""Other fields that shape the prompt: with model, system and tools the same, a change in them cannot be
diagnosed (``unavailable``)."""


def _bare(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _bare(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_bare(v) for v in value]
    return value


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(_bare(value), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _system(body: dict[str, Any]) -> Any:
    system = body.get("system")
    return [{"type": "text", "text": system}] if isinstance(system, str) else system or []


def _fingerprint(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": str(body.get("model")),
        "tools": _digest(body.get("tools") or []),
        "system": _digest(_system(body)),
        "messages": [_digest(m) for m in body["messages"]],
        "settings": _digest({k: body.get(k) for k in _SETTINGS}),
    }


def _asked(body: dict[str, Any]) -> dict[str, Any] | None:
    asked = body.get("diagnostics")
    return asked if isinstance(asked, dict) else None


def diagnose(state: SimState, body: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
    """Whether ``body`` asks for diagnostics, and the answer's ``diagnostics`` value when it does."""
    asked = _asked(body)
    if asked is None:
        return False, None
    previous = asked.get("previous_message_id")
    if not isinstance(previous, str) or not previous:
        return True, None
    with state.lock:
        held = state.fingerprints.get(previous)
    if held is None:
        return True, {"cache_miss_reason": {"type": "previous_message_not_found"}}
    now = _fingerprint(body)
    first = next((p for p in PARTS[:3] if held[p] != now[p]), None)
    if first is None and held["settings"] != now["settings"]:
        return True, {"cache_miss_reason": {"type": "unavailable"}}
    kept = len(held["messages"])
    if first is None and now["messages"][:kept] != held["messages"]:
        first = "messages"
    if first is None:
        return True, None
    messages = body["messages"]
    if first == "messages":
        same = next(
            (i for i, (a, b) in enumerate(zip(held["messages"], now["messages"], strict=False)) if a != b), kept
        )
        missed = sum(ITEM_OVERHEAD + count_value(m) for m in messages[same:kept])
    else:
        system = _system(body)
        missed = (
            count_value(body.get("tools") or [])
            + count_value(system)
            + sum(ITEM_OVERHEAD + count_value(m) for m in messages[:kept])
        )
    return True, {"cache_miss_reason": {"type": f"{first}_changed", "cache_missed_input_tokens": missed}}


def remember(state: SimState, message_id: str, body: dict[str, Any]) -> None:
    """Keep ``body``'s fingerprint under its answer's id when it opted in."""
    if _asked(body) is not None:
        with state.lock:
            state.fingerprints[message_id] = _fingerprint(body)


def plant(state: SimState, message_id: str, part: str) -> None:
    """Change ``part`` of the fingerprint held for ``message_id``, as if the server had seen another request."""
    if part not in PARTS:
        raise ValueError(f"part={part!r}: use one of {', '.join(PARTS)}")
    with state.lock:
        held = state.fingerprints.get(message_id)
        if held is None:
            raise KeyError(f"no fingerprint is held for {message_id!r} (its request did not send diagnostics)")
        if part == "messages":
            held["messages"] = [*held["messages"][:-1], "planted"] if held["messages"] else ["planted"]
        else:
            held[part] = f"planted {held[part]}"
