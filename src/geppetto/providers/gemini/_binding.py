"""The prefix guard on Gemini's thought signatures (see :mod:`geppetto.providers._prefix_guard`).

A thought signature is the model's reasoning, encrypted, attached to the part it came with (a thought, a
function call, a text). It was made after the ``systemInstruction``, the ``tools`` and every part before
it; replayed behind another prefix it no longer describes what the model thought. The request is read as
units ``[role, part]`` (the part without its signature) under a header of the system instruction and the
tools; a signed part whose recorded prefix differs is stale. ``drop`` and ``rewrite`` (Gemini has no
append-only form of a changed prefix) leave the signature out: a thought part goes whole, a call or text
keeps its content without the signature (and a call of the current turn then gets Google's placeholder,
as any unsigned call does); ``error`` raises. Like Claude's, the pass is incremental: while the contents an
earlier pass proved did not change, only those after them are read (``_prefix_guard.quick_check``).
"""

from __future__ import annotations

import json
from typing import Any

from ...turns import PAYLOAD_THOUGHT_SIGNATURE, Block, Turn
from .._prefix_guard import Unit, advanced, apply_policy, check, header_digest, keep, proven_for, quick_check, stamp

__all__ = ["guard_contents", "record_response"]

_NO_REWRITE = "Gemini has no append-only form of a changed prefix: dropped instead"


def _canon(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _head(body: dict[str, Any]) -> str:
    return header_digest(_canon(body.get("systemInstruction") or {}), _canon(body.get("tools") or []))


def _units(contents: list[dict[str, Any]], origin: dict[int, Block]) -> tuple[list[Unit], list[Any]]:
    units: list[Unit] = []
    parts: list[Any] = []
    for content in contents:
        for part in content["parts"]:
            bare = {k: v for k, v in part.items() if k != "thoughtSignature"}
            units.append(
                Unit(_canon([content["role"], bare]) + b"\n", origin.get(id(part)), "thoughtSignature" in part)
            )
            parts.append(part)
    return units, parts


def _parts(content: dict[str, Any]) -> int:
    return len(content["parts"])


def guard_contents(turn: Turn, body: dict[str, Any], origin: dict[int, Block], *, policy: str, model: str) -> None:
    """Leave stale thought signatures out of ``body["contents"]`` (in place), as ``policy`` says. While the
    contents an earlier pass proved did not change, only those after them are read."""
    contents = body["contents"]
    if not contents:
        apply_policy(turn, "gemini", model, policy, [], [])
        return
    head = _head(body)
    if quick_check(turn, head, contents, lambda cs: _units(list(cs), origin)[0], _parts) is not None:
        apply_policy(turn, "gemini", model, policy, [], [])  # nothing stale: no report from before stays
        return
    units, parts = _units(contents, origin)
    stale = check(units, head) if any(u.reasoning for u in units) else []
    apply_policy(turn, "gemini", model, policy, stale, units, note=_NO_REWRITE if policy == "rewrite" else "")
    keep(turn, None if stale else advanced(None, head, units, _parts(contents[-1]), len(contents)))
    if not stale:
        return
    gone = {id(parts[s.index]) for s in stale}
    for content in contents:
        kept = []
        for part in content["parts"]:
            if id(part) in gone:
                if part.get("thought"):
                    continue  # a thought is nothing without the reasoning it stands for
                part.pop("thoughtSignature", None)
                if not part:
                    continue  # a part that carried only the signature
            kept.append(part)
        content["parts"] = kept
    body["contents"] = [c for c in contents if c["parts"]]


def record_response(
    turn: Turn, body: dict[str, Any], new: list[Block], contents: list[dict[str, Any]], origin: dict[int, Block]
) -> None:
    """Stamp the signed blocks of a response with the prefix they were made after: the request's system
    instruction and tools (``body``) and the Turn's contents now (``contents``, from ``build_contents``
    with ``origin``), which hold the response's parts after the request's."""
    if not any(b.payload.get(PAYLOAD_THOUGHT_SIGNATURE) for b in new):
        return
    head = _head(body)
    progress = proven_for(turn, head, len(contents))
    if progress is not None:  # the request's proven contents are the Turn's first ones still
        stamp(_units(contents[progress.messages :], origin)[0], head, new, start=progress.hasher)
        return
    stamp(_units(contents, origin)[0], head, new)
