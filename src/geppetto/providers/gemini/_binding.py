"""The prefix guard on Gemini's thought signatures (see :mod:`geppetto.providers._prefix_guard`).

A thought signature is the model's reasoning, encrypted, attached to the part it came with (a thought, a
function call, a text). It was made after the ``systemInstruction``, the ``tools`` and every part before
it; replayed behind another prefix it no longer describes what the model thought. The request is read as
units ``[role, part]`` (the part without its signature) under a header of the system instruction and the
tools; a signed part whose recorded prefix differs is stale. ``drop`` and ``rewrite`` (Gemini has no
append-only form of a changed prefix) leave the signature out: a thought part goes whole, a call or text
keeps its content without the signature (and a call of the current turn then gets Google's placeholder,
as any unsigned call does); ``error`` raises.
"""

from __future__ import annotations

import json
from typing import Any

from ...turns import PAYLOAD_THOUGHT_SIGNATURE, Block, Turn
from .._prefix_guard import Unit, apply_policy, check, header_digest, stamp

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


def guard_contents(turn: Turn, body: dict[str, Any], origin: dict[int, Block], *, policy: str, model: str) -> None:
    """Leave stale thought signatures out of ``body["contents"]`` (in place), as ``policy`` says."""
    units, parts = _units(body["contents"], origin)
    if not any(u.reasoning for u in units):
        apply_policy(turn, "gemini", model, policy, [], units)  # nothing replayed: no report from before stays
        return
    stale = check(units, _head(body))
    apply_policy(turn, "gemini", model, policy, stale, units, note=_NO_REWRITE if policy == "rewrite" else "")
    if not stale:
        return
    gone = {id(parts[s.index]) for s in stale}
    for content in body["contents"]:
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
    body["contents"] = [c for c in body["contents"] if c["parts"]]


def record_response(
    turn: Turn, body: dict[str, Any], new: list[Block], contents: list[dict[str, Any]], origin: dict[int, Block]
) -> None:
    """Stamp the signed blocks of a response with the prefix they were made after: the request's system
    instruction and tools (``body``) and the Turn's contents now (``contents``, from ``build_contents``
    with ``origin``), which hold the response's parts after the request's."""
    if not any(b.payload.get(PAYLOAD_THOUGHT_SIGNATURE) for b in new):
        return
    units, _ = _units(contents, origin)
    stamp(units, _head(body), new)
