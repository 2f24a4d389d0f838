"""Claude's thinking-block binding, proven before sending (see :mod:`geppetto.providers._prefix_guard`).

Claude binds each ``thinking`` / ``redacted_thinking`` signature to the top-level ``system``, the ``tools``
and every message content before the block. A request is read as units ``[role, content]`` (without
``cache_control``, which moves between requests) under a header of the system and tools digests; a
thinking unit whose recorded prefix differs is stale and is left out (``drop``), raised (``error``) or,
under ``rewrite``, kept by sending the system prompt the blocks were made under and the new one as an
appended ``role: "system"`` message (Anthropic's advice for a changed system prompt); ``append`` does the
same on a model that takes a mid-conversation system message and is ``drop`` on any other (the report's
``fallback`` says so). The notes stay at
the place they were first added (``anthropic.system_notes@v1`` in turn data), so the next requests stay
append-only too. A changed tool list or an edited message cannot be rewritten: those blocks are dropped.

Requests that replay thinking also send ``thinking.block_binding.prefix_mismatch_behavior`` with the
``thinking-binding-controls-2026-08-01`` beta (``drop_block`` unless the policy is ``error``), so a
mismatch the guard could not see (a block made before it kept digests) costs reasoning, not a 400; the
response's ``input_transformations`` are read back, logged and counted.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from typing import Any

from ..._json import EncodedJSON
from ...events import EventLog, metadata_for, publish
from ...turns import Block, Turn, turn_data_key, turn_meta_key
from .._prefix_guard import (
    Unit,
    advanced,
    apply_policy,
    asked_policy,
    check,
    guard_metrics,
    header_digest,
    keep,
    proven_for,
    quick_check,
    stamp,
)

__all__ = [
    "BINDING_BETA",
    "INPUT_TRANSFORMATIONS",
    "SYSTEM_NOTES",
    "effective_policy",
    "guard_request",
    "record_response",
    "report_transformations",
    "takes_system_messages",
    "with_beta",
]

log = logging.getLogger("geppetto.providers.anthropic")

BINDING_BETA = "thinking-binding-controls-2026-08-01"
"""The beta that ``thinking.block_binding`` needs (without it Claude refuses the field)."""

SYSTEM_NOTES = turn_data_key("anthropic", "system_notes", 1, dict)
"""Under ``prefix_policy="rewrite"``: ``{"system": the system blocks thinking was bound to, "notes":
[{"at": message index, "text": a later system prompt}]}``."""

INPUT_TRANSFORMATIONS = turn_meta_key("anthropic", "input_transformations", 1, list)
"""What Claude changed in the last request's input before the model saw it (``input_transformations``)."""

_THINKING = ("thinking", "redacted_thinking")


def _plain(value: Any) -> Any:
    # A structured-output tool's schema is an EncodedJSON (encoded once, sent many times): its dict is
    # what the digest canonicalizes, so the digest does not depend on how the schema was held.
    if isinstance(value, EncodedJSON):
        return value.value
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_CANON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=_plain).encode


def _canon(value: Any) -> bytes:
    return _CANON(value).encode()


def _bare(value: Any) -> Any:
    """``value`` (a content block, a tool, or a list of them) without ``cache_control`` marks: they move from
    request to request, and the engine puts them only on top-level blocks (``_cache``)."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "cache_control"} if "cache_control" in value else value
    if isinstance(value, list):
        return [_bare(v) for v in value]
    return value


def _system_list(system: Any) -> list[Any]:
    if isinstance(system, str):
        return [{"type": "text", "text": system}] if system else []
    return list(system or [])


def head_of(body: dict[str, Any]) -> str:
    """The header digest of a request: ``<system digest>:<tools digest>``."""
    system, tools = _bare(_system_list(body.get("system"))), _bare(body.get("tools") or [])
    return f"{header_digest(_canon(system))}:{header_digest(_canon(tools))}"


def units_of(messages: list[dict[str, Any]], origin: dict[int, Block]) -> tuple[list[Unit], list[Any]]:
    """The request's message content as units (each with the block it came from), and the content
    objects they were made of, in the same order."""
    units: list[Unit] = []
    parts: list[Any] = []
    for message in messages:
        role = message["role"]
        content = message["content"]
        for part in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            block = origin.get(id(part))
            wire = _canon([role, _bare(part)]) + b"\n"
            units.append(Unit(wire, block, isinstance(part, dict) and part.get("type") in _THINKING))
            parts.append(part)
    return units, parts


def _without(messages: list[dict[str, Any]], drop: set[int]) -> list[dict[str, Any]]:
    """``messages`` without the content objects in ``drop`` (by id); an emptied message goes, and two
    messages of one side that then meet merge, as the dialect merges them."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = [c for c in message["content"] if id(c) not in drop]
        if not content:
            continue
        if out and out[-1]["role"] == message["role"]:
            out[-1]["content"].extend(content)
        else:
            out.append({**message, "content": content})
    return out


def _text(system: list[Any]) -> str:
    return "\n\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))


def _rewrite(turn: Turn, body: dict[str, Any]) -> bool:
    """Send the pinned system prompt and the later ones as notes; False when nothing is pinned."""
    pinned = SYSTEM_NOTES.get(turn.data)
    if not pinned:
        return False
    current = _system_list(body.get("system"))
    notes = list(pinned.get("notes") or [])
    latest = notes[-1]["text"] if notes else _text(pinned["system"])
    if _text(current) != latest:
        notes.append({"at": len(body["messages"]), "text": _text(current)})
        SYSTEM_NOTES.set(turn.data, {**pinned, "notes": notes})
    if pinned["system"]:
        body["system"] = copy.deepcopy(pinned["system"])  # cache marks go on the request's copy, not the Turn's
    else:
        body.pop("system", None)
    messages = body["messages"]
    for note in sorted(notes, key=lambda n: n["at"], reverse=True):
        at = min(note["at"], len(messages))
        while 0 < at < len(messages) and _calls(messages[at - 1]):  # never between a call and its result
            at += 1
        if note["text"]:
            messages.insert(at, {"role": "system", "content": [{"type": "text", "text": note["text"]}]})
    return True


def _calls(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(c, dict) and c.get("type") == "tool_use" for c in content)


def _parts(message: dict[str, Any]) -> int:
    content = message["content"]
    return len(content) if isinstance(content, list) else 1


def _quick_check(turn: Turn, body: dict[str, Any], origin: dict[int, Block], head: str) -> bool | None:
    return quick_check(turn, head, body["messages"], lambda messages: units_of(list(messages), origin)[0], _parts)


_SYSTEM_MESSAGES = re.compile(
    r"(^|[/.:])(sim-|claude-(opus-4-[89]|(opus|sonnet|haiku)-[5-9]|fable-\d|mythos-\d)($|[-.@:_]))", re.IGNORECASE
)
"""The models that take a mid-conversation ``role: "system"`` message: Claude Opus 4.8 and the families
after it (Opus, Sonnet, Haiku 5 and later, Fable, Mythos), and the simulator's ``sim-*`` models. Older
models refuse it (``role 'system' is not supported on this model``); an unknown name is taken as one that
refuses, so ``append`` falls back to ``drop`` rather than risk a 400."""


def takes_system_messages(model: str) -> bool:
    """Whether ``model`` takes a mid-conversation system message (what ``prefix_policy="append"`` sends)."""
    return bool(_SYSTEM_MESSAGES.search(model))


def effective_policy(turn: Turn, policy: str, model: str) -> tuple[str, str]:
    """What the guard does for ``turn``'s request (the middleware's ask, else ``policy``), and the policy
    named in its report. ``append`` is sent as ``rewrite`` does it (the bound system prompt kept, the new
    one an appended system message) on a model that takes one; on another it is ``drop``, and says so."""
    asked = asked_policy(turn, policy)
    if asked != "append":
        return asked, asked
    if takes_system_messages(model):
        return "rewrite", "append"
    return "drop", "append"


def guard_request(
    turn: Turn, body: dict[str, Any], origin: dict[int, Block], *, policy: str, model: str
) -> dict[str, Any]:
    """Apply the prefix guard to ``body`` (changed in place and returned). Under ``rewrite`` (and
    ``append`` on a model that takes a system message) a pinned system prompt and its notes go into every
    request, replaying thinking or not: thinking made in answer to this one is bound to what it carries.
    While the messages an earlier pass proved did not change, only those after them are read."""
    policy, named = effective_policy(turn, policy, model)
    fallback = named == "append" and policy == "drop"
    if policy != "rewrite" and body["messages"]:
        replays = _quick_check(turn, body, origin, head_of(body))
        if replays is not None:
            apply_policy(turn, "anthropic", model, named, [], [])
            if replays:
                _ask_binding(body, policy)
            return body
    units, parts = units_of(body["messages"], origin)
    replays = any(u.reasoning for u in units)
    stale = check(units, head_of(body)) if replays else []
    rewritten, note = 0, ""
    if policy == "rewrite" and _rewrite(turn, body):
        units, parts = units_of(body["messages"], origin)
        before = len(stale)
        stale = check(units, head_of(body)) if replays else []
        rewritten = max(0, before - len(stale))
    if stale and policy == "rewrite":
        note = "a changed tool list or an edited message cannot be sent append-only: dropped instead"
    elif stale and fallback:
        note = f"{model} takes no mid-conversation system message: dropped instead"
    apply_policy(turn, "anthropic", model, named, stale, units, rewritten=rewritten, note=note)
    if stale:
        body["messages"] = _without(body["messages"], {id(parts[s.index]) for s in stale})
    if replays:
        _ask_binding(body, policy)
    if policy != "rewrite" and body["messages"]:
        messages = body["messages"]
        keep(turn, None if stale else advanced(None, head_of(body), units, _parts(messages[-1]), len(messages)))
    return body


def with_beta(headers: dict[str, str], beta: str) -> dict[str, str]:
    """The ``anthropic-beta`` header of ``headers`` with ``beta`` added (once), as a one-header dict."""
    name = next((k for k in headers if k.lower() == "anthropic-beta"), "anthropic-beta")
    betas = [b.strip() for b in headers.get(name, "").split(",") if b.strip()]
    return {name: ",".join(betas if beta in betas else [*betas, beta])}


def _ask_binding(body: dict[str, Any], policy: str) -> None:
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive"):
        behavior = "error" if policy == "error" else "drop_block"
        thinking["block_binding"] = {"prefix_mismatch_behavior": behavior}


def record_response(
    turn: Turn,
    body: dict[str, Any],
    new: list[Block],
    built: tuple[list[Any], list[dict[str, Any]]],
    origin: dict[int, Block],
    *,
    policy: str,
) -> None:
    """Stamp the thinking blocks a response produced with the prefix they were made after: the request as
    sent (``body``'s system and tools) and the Turn's messages now (``built``, from ``build_messages`` with
    ``origin``), which hold the response's content after the request's; under ``rewrite``, pin the system
    prompt they were made under (the first time)."""
    if not any(b.kind.value == "reasoning" for b in new):
        return
    policy = effective_policy(turn, policy, str(body.get("model") or ""))[0]
    if policy == "rewrite" and not SYSTEM_NOTES.get(turn.data):
        SYSTEM_NOTES.set(turn.data, {"system": _bare(_system_list(body.get("system"))), "notes": []})
    system, messages = built
    sent = {**body, "system": system, "messages": messages}
    if policy == "rewrite":
        _rewrite(turn, sent)
    head = head_of(sent)
    progress = proven_for(turn, head, len(messages)) if policy != "rewrite" else None
    if progress is not None:  # the request's proven messages are the Turn's first ones still
        stamp(units_of(messages[progress.messages :], origin)[0], head, new, start=progress.hasher)
        return
    stamp(units_of(sent["messages"], origin)[0], head, new)


def report_transformations(turn: Turn, transformations: list[Any] | None, model: str) -> None:
    """Log and count what Claude changed in the request (``input_transformations``), and keep it on the Turn."""
    if transformations is None:
        INPUT_TRANSFORMATIONS.delete(turn.metadata)
        return
    INPUT_TRANSFORMATIONS.set(turn.metadata, list(transformations))
    if not transformations:
        return
    guard_metrics.add("transformations", "anthropic", len(transformations))
    kinds = ", ".join(
        f"{t.get('type')} at {t.get('path')} ({t.get('reason')})" for t in transformations if isinstance(t, dict)
    )
    message = f"anthropic: Claude changed the request before the model saw it: {kinds}"
    log.warning("%s", message)
    publish(EventLog(metadata_for(turn, "anthropic", model), "warning", message, {"input_transformations": kinds}))
