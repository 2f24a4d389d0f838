"""Blocks as Interactions API steps and back, the state a Turn keeps, and the Interactions wire form of
the shared anchor proof (:mod:`geppetto.providers._chain`).

Every block the server holds is a step: ``user_input`` (a user block), ``model_output`` (assistant text),
``thought`` (a reasoning block with its ``signature``, replayed exactly and only for this engine's own
thoughts, never once the prefix guard left it out), ``function_call`` / ``function_result`` (a tool call and its result), and any other step (a
server-side tool's call or result, non-text output) kept as it came in an ``other`` block and sent back
unchanged. System blocks are not steps: they go as ``system_instruction`` on every request (the API keeps
only the input and output steps behind ``previous_interaction_id``), so they are not in the fingerprint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from geppetto._exceptions import ConfigurationError
from geppetto.turns import (
    BLOCK_META_PROVIDER,
    PAYLOAD_ARGS,
    PAYLOAD_ERROR,
    PAYLOAD_FILES,
    PAYLOAD_ID,
    PAYLOAD_ITEM,
    PAYLOAD_NAME,
    PAYLOAD_TEXT,
    PAYLOAD_THOUGHT_SIGNATURE,
    Block,
    BlockKind,
    Turn,
    block_meta_key,
    raw_block,
    turn_data_key,
)

from .._chain_wire import Wire
from .._files import interactions_file_contents
from .._prefix_guard import REASONING_STALE
from .._streaming import image_parts, tool_result_text

__all__ = [
    "INTERACTIONS_STATE",
    "INTERACTION_STEPS",
    "MODES",
    "PLACEHOLDER_SIGNATURE",
    "PROVIDER",
    "THOUGHT_STAND_IN",
    "WIRE",
    "InteractionsState",
    "block_of_step",
    "blocks_to_steps",
    "chain_seed",
    "get_interactions_state",
    "ours",
    "set_interactions_state",
    "step_of",
]

PROVIDER = "gemini-interactions"
"""The provider name of the Interactions engine's blocks, profiles and ``--provider``."""

MODES = ("chained", "stateless")

INTERACTION_STEPS = block_meta_key("gemini", "interaction_steps", 1, int)
"""``gemini.interaction_steps@v1``: how many blocks the interaction that produced a block gave."""
INTERACTION_REFUSED = block_meta_key("gemini", "not_anchorable", 1, str)
"""``gemini.not_anchorable@v1``: why an interaction can never be an anchor (it did not complete)."""
THOUGHT_STAND_IN = block_meta_key("gemini", "thought_stand_in", 1, bool)
"""``gemini.thought_stand_in@v1``: on a thought the prefix guard left out where a function call of the current
turn needed one: from then on it goes as a thought with :data:`PLACEHOLDER_SIGNATURE` only (so the server's
history stays the Turn's)."""
PLACEHOLDER_SIGNATURE = "skip_thought_signature_validator"
"""Google's documented stand-in for a thought signature the client does not have."""


@dataclass
class InteractionsState:
    """How a Turn talks to the Interactions API (``Turn.data`` key ``gemini.interactions_state@v1``).

    ``mode``: ``chained`` (``previous_interaction_id`` = the anchor, input = the steps after it) or
    ``stateless`` (the whole Turn, ``store`` off). ``previous_interaction_id`` records the interaction the
    last request made; the engine writes it and never reads it as an instruction. ``base`` names an
    interaction whose context comes before the Turn's first block (a fresh Turn continuing it)."""

    mode: str = "chained"
    previous_interaction_id: str | None = None
    base: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigurationError(f"unknown Interactions mode {self.mode!r}; use one of {', '.join(MODES)}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "previous_interaction_id": self.previous_interaction_id}
        if self.base is not None:
            out["base"] = self.base
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InteractionsState:
        return cls(str(data.get("mode") or "chained"), data.get("previous_interaction_id"), data.get("base"))


INTERACTIONS_STATE = turn_data_key("gemini", "interactions_state", 1, InteractionsState)


def get_interactions_state(turn: Turn) -> InteractionsState | None:
    """The Turn's Interactions state, or None when it has none."""
    return INTERACTIONS_STATE.get(turn.data)


def set_interactions_state(turn: Turn, state: InteractionsState) -> None:
    """Store ``state`` in ``turn.data``."""
    INTERACTIONS_STATE.set(turn.data, state)


def chain_seed(state: InteractionsState | None) -> str:
    """The fingerprint seed: the Interactions API's own (its fingerprints never equal another engine's),
    after ``base`` for a fresh Turn continuing an interaction."""
    return f"interactions:after:{state.base}" if state is not None and state.base else "interactions"


def ours(block: Block) -> bool:
    """True for a block this engine made (only those are replayed as thoughts or server-side tool steps)."""
    return BLOCK_META_PROVIDER.get(block.metadata) == PROVIDER


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _user_content(block: Block) -> list[dict[str, Any]]:
    """A user block's text, images and attached files as ``user_input`` content (files as typed contents,
    see :func:`geppetto.providers._files.interactions_file_contents`)."""
    content = [_text(block.text)] if block.text else []
    for kind, value, media_type in image_parts(block):
        if kind == "url":
            image = {"type": "image", "uri": value}
            if media_type:
                image["mime_type"] = media_type
        else:
            image = {"type": "image", "data": value, "mime_type": media_type}
        content.append(image)
    if block.payload.get(PAYLOAD_FILES):
        content += interactions_file_contents(block)
    return content


def step_of(block: Block) -> dict[str, Any] | None:
    """The step ``block`` is sent as (without a function result's name, which comes from its call), or
    None when it is not sent: a system block, empty text, another provider's reasoning."""
    kind, payload = block.kind, block.payload
    if kind is BlockKind.USER:
        return {"type": "user_input", "content": _user_content(block)}
    if kind is BlockKind.LLM_TEXT:
        return {"type": "model_output", "content": [_text(block.text)]} if block.text.strip() else None
    if kind is BlockKind.TOOL_CALL:
        args = payload.get(PAYLOAD_ARGS)
        arguments = args if isinstance(args, dict) else ({} if args in (None, "") else {"input": args})
        return {
            "type": "function_call",
            "id": str(payload.get(PAYLOAD_ID)),
            "name": str(payload.get(PAYLOAD_NAME)),
            "arguments": arguments,
        }
    if kind is BlockKind.TOOL_USE:
        step: dict[str, Any] = {
            "type": "function_result",
            "call_id": str(payload.get(PAYLOAD_ID)),
            "result": tool_result_text(block),
        }
        if payload.get(PAYLOAD_ERROR) is not None:
            step["is_error"] = True
        return step
    if kind is BlockKind.REASONING and ours(block) and REASONING_STALE.get(block.metadata):
        return {"type": "thought", "signature": PLACEHOLDER_SIGNATURE} if THOUGHT_STAND_IN.get(block.metadata) else None
    if kind is BlockKind.REASONING and ours(block):
        thought: dict[str, Any] = {"type": "thought"}
        if payload.get(PAYLOAD_THOUGHT_SIGNATURE):
            thought["signature"] = payload[PAYLOAD_THOUGHT_SIGNATURE]
        if block.text:
            thought["summary"] = [_text(block.text)]
        return thought
    if kind is BlockKind.OTHER and ours(block) and isinstance(payload.get(PAYLOAD_ITEM), dict):
        item: dict[str, Any] = payload[PAYLOAD_ITEM]
        if REASONING_STALE.get(block.metadata):  # the prefix guard left its signature out, for good
            return {k: v for k, v in item.items() if k != "signature"}
        return item
    return None


def blocks_to_steps(blocks: list[Block], names: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The ``input`` steps of ``blocks``, each function result named after its call (found among ``blocks``,
    else in ``names``: call id -> tool name, for a delta whose calls came before it)."""
    names = dict(names or {})
    names.update(
        (str(b.payload.get(PAYLOAD_ID)), str(b.payload.get(PAYLOAD_NAME)))
        for b in blocks
        if b.kind is BlockKind.TOOL_CALL
    )
    steps = []
    for block in blocks:
        step = step_of(block)
        if step is None:
            continue
        if step["type"] == "function_result" and names.get(step["call_id"]):
            step = {**step, "name": names[step["call_id"]]}
        steps.append(step)
    return steps


def block_of_step(step: dict[str, Any]) -> Block | None:
    """The block an output step becomes (None for a step with nothing in it)."""
    kind = step.get("type")
    if kind == "thought":
        summary = "".join(str(c.get("text") or "") for c in step.get("summary") or () if c.get("type") == "text")
        block = Block(BlockKind.REASONING, {PAYLOAD_TEXT: summary} if summary else {})
        if step.get("signature"):
            block.payload[PAYLOAD_THOUGHT_SIGNATURE] = str(step["signature"])
        return block if block.payload else None
    if kind == "model_output":
        content = step.get("content") or []
        if all(c.get("type") == "text" for c in content):
            text = "".join(str(c.get("text") or "") for c in content)
            return Block.llm_text(text) if text else None
    if kind == "function_call":
        return Block.tool_call(str(step.get("id") or ""), str(step.get("name") or ""), step.get("arguments") or {})
    return raw_block(dict(step))


class _InteractionsWire(Wire):
    def fresh(self, block: Block) -> bytes | None:
        step = step_of(block)
        if step is None:
            return None
        return (json.dumps(step, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


WIRE = _InteractionsWire(str(INTERACTION_STEPS), str(INTERACTION_REFUSED))
"""The Interactions wire form of a block, as the shared proof hashes it."""
