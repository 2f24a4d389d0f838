"""Claude's binding of thinking signatures to their prefix, as the service enforces it.

Each thinking block the simulator produces is bound to the digest of what came before it: the top-level
``system``, the ``tools`` and every message content before it (``cache_control`` marks aside). A later
request that replays the block behind a different prefix fails the prefix check: a 400 with the
service's text, or, under ``thinking.block_binding.prefix_mismatch_behavior: "drop_block"`` (which needs
the ``thinking-binding-controls-2026-08-01`` beta), the block is removed before the model sees it and
the response's ``input_transformations`` lists it. Without ``block_binding`` the account's default
applies: :attr:`SimState.claude_prefix_mismatch` (``"error"``, as for accounts created from 2026-08-31;
``"allow"`` for older accounts, where the block is shown to the model and reported as
``thinking_mismatch_allowed``). A removed block takes the rest of its turn's consecutive thinking blocks
with it, each reported.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ._errors import SimError
from ._state import SimState

__all__ = ["BINDING_BETA", "bind_content", "check_binding", "take_binding"]

BINDING_BETA = "thinking-binding-controls-2026-08-01"
_BEHAVIORS = ("error", "drop_block")
_REASON = "prefix_binding_mismatch"
_THINKING = ("thinking", "redacted_thinking")


def _bare(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _bare(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_bare(v) for v in value]
    return value


def _canon(value: Any) -> bytes:
    return json.dumps(_bare(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _start(body: dict[str, Any]) -> Any:
    system = body.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}] if system else []
    h = hashlib.sha256()
    h.update(_canon(system or []))
    h.update(_canon(body.get("tools") or []))
    return h


def _parts(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def _key(block: dict[str, Any]) -> str:
    return str(block.get("signature") or block.get("data") or "")


def take_binding(body: dict[str, Any], betas: str) -> str | None:
    """Remove and return ``thinking.block_binding.prefix_mismatch_behavior`` (None when absent), with the
    service's 400 when the beta is missing or the value is not one it knows."""
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or "block_binding" not in thinking:
        return None
    where = f"thinking.{thinking.get('type')}.block_binding"
    if BINDING_BETA not in [b.strip() for b in betas.split(",")]:
        raise SimError(400, f"{where}: Extra inputs are not permitted")
    binding = thinking.pop("block_binding")
    behavior = binding.get("prefix_mismatch_behavior") if isinstance(binding, dict) else None
    if behavior not in _BEHAVIORS:
        raise SimError(400, f"{where}.prefix_mismatch_behavior: Input should be 'error' or 'drop_block'")
    return str(behavior)


def check_binding(state: SimState, body: dict[str, Any], behavior: str | None) -> list[dict[str, Any]]:
    """Check every replayed thinking block against its recorded prefix; raise the 400 or remove the stale
    ones from ``body`` (in place) and return the ``input_transformations`` entries."""
    mode = behavior or state.claude_prefix_mismatch
    h = _start(body)
    dropped: list[tuple[int, int]] = []
    changes: list[dict[str, Any]] = []
    for i, message in enumerate(body["messages"]):
        role = message.get("role")
        run = False  # inside a run of consecutive thinking blocks whose first one was removed
        for j, part in enumerate(_parts(message)):
            thinking = isinstance(part, dict) and part.get("type") in _THINKING
            if thinking:
                with state.lock:
                    bound = state.thinking_bound.get(_key(part))
                failed = bound is not None and bound != h.hexdigest()
                path = f"messages.{i}.content.{j}"
                if failed and mode == "error":
                    raise SimError(
                        400,
                        f"{path}: Invalid `signature` in `{part['type']}` block. The block is bound to a different "
                        'conversation. Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".',
                    )
                if failed and mode == "allow":
                    changes.append({"type": "thinking_mismatch_allowed", "path": path, "reason": _REASON})
                elif failed or run:  # the rest of that turn's consecutive thinking blocks go with it
                    dropped.append((i, j))
                    changes.append({"type": "thinking_dropped", "path": path, "reason": _REASON})
                    run = True
            else:
                run = False
            h.update(_canon([role, part]))
    for i, j in reversed(dropped):
        content = body["messages"][i]["content"]
        del content[j]
    body["messages"] = [m for m in body["messages"] if _parts(m)]
    return changes


def bind_content(state: SimState, body: dict[str, Any], content: list[dict[str, Any]]) -> None:
    """Record the prefix of each thinking block of a response (the request as sent, then the response's
    own content before it)."""
    h = _start(body)
    for message in body["messages"]:
        for part in _parts(message):
            h.update(_canon([message.get("role"), part]))
    with state.lock:
        for part in content:
            if part.get("type") in _THINKING:
                state.thinking_bound[_key(part)] = h.hexdigest()
            h.update(_canon(["assistant", part]))
