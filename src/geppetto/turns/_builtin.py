"""Provider output geppetto keeps as it came: raw ``other`` blocks, built-in tool calls, citations.

Every engine keeps each output item, content block or part it does not model as a block of kind
``other`` whose ``payload["item"]`` holds it exactly as the provider sent it (thought signature and
all), stamped with its provider; the engine of that provider sends it back unchanged, other engines
leave it out. What users act on is typed on top, never instead:

- ``payload["builtin"]`` on an ``other`` block that is a provider built-in tool call or result
  (web search, web fetch, file search, code execution, MCP, image generation): a :class:`BuiltinTool`
  dict ``{"tool", "phase", "call_id", ...}``.
- ``payload["citations"]`` on ``llm_text``: the provider's annotations / citations on that text, as
  it sent them (Responses ``annotations``, Claude ``citations``, Gemini ``groundingMetadata`` /
  ``citationMetadata``).
- ``payload["phase"]``: an OpenAI Responses assistant message's ``phase`` (``commentary`` /
  ``final_answer``).
- ``payload["logprobs"]``: token log probabilities, as the provider sent them.
- ``payload["extra"]``: fields of a modelled block geppetto has no name for (Claude's ``caller`` on a
  ``tool_use``), sent back as they came by the engine of the provider that produced the block.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from ._model import Block, BlockKind

__all__ = [
    "PAYLOAD_BUILTIN",
    "PAYLOAD_CITATIONS",
    "PAYLOAD_EXTRA",
    "PAYLOAD_ITEM",
    "PAYLOAD_LOGPROBS",
    "PAYLOAD_PHASE",
    "BuiltinTool",
    "builtin_of",
    "raw_block",
    "with_extra",
]

PAYLOAD_ITEM = "item"
"""Payload key of an ``other`` block: the raw item / content block / part geppetto does not model."""
PAYLOAD_BUILTIN = "builtin"
"""Payload key of an ``other`` block that is a built-in tool call or result (a :class:`BuiltinTool`)."""
PAYLOAD_CITATIONS = "citations"
"""Payload key of an ``llm_text`` block: the provider's annotations / citations on its text."""
PAYLOAD_PHASE = "phase"
"""Payload key of an ``llm_text`` block: the Responses message ``phase``."""
PAYLOAD_EXTRA = "extra"
"""Payload key: the provider's fields of a modelled block that geppetto has no name for."""
PAYLOAD_LOGPROBS = "logprobs"
"""Payload key of an ``llm_text`` block: token log probabilities as the provider sent them."""


class BuiltinTool(TypedDict, total=False):
    """What a built-in tool block is about, in one vocabulary across providers."""

    tool: str
    """``web_search``, ``web_fetch``, ``file_search``, ``code_execution``, ``mcp``, ``image_generation``, or
    the provider's own name for another built-in tool."""
    phase: Literal["call", "result"]
    call_id: str
    """Pairs a call with its result (the provider's id; empty when the provider gives none)."""
    name: str
    """The tool's name as the provider called it (an MCP tool's own name)."""
    input: Any
    """The call's input: search query, code, MCP arguments."""
    output: Any
    """A result's output text or value, when it has one."""
    error: bool
    sources: list[dict[str, Any]]
    """A search result's sources: ``{"url", "title"}`` each."""


def raw_block(item: dict[str, Any], builtin: BuiltinTool | None = None) -> Block:
    """An ``other`` block holding ``item`` as it came (the engine stamps its provider)."""
    payload: dict[str, Any] = {PAYLOAD_ITEM: item}
    if builtin:
        payload[PAYLOAD_BUILTIN] = dict(builtin)
    return Block(BlockKind.OTHER, payload, role="assistant")


def with_extra(block: Block, raw: dict[str, Any], modelled: frozenset[str]) -> Block:
    """``block`` with the fields of ``raw`` outside ``modelled`` kept under ``payload["extra"]``."""
    extra = {k: v for k, v in raw.items() if k not in modelled}
    if extra:
        block.payload[PAYLOAD_EXTRA] = extra
    return block


def builtin_of(block: Block) -> BuiltinTool | None:
    """The built-in tool call or result ``block`` is, else None."""
    if block.kind is not BlockKind.OTHER:
        return None
    value = block.payload.get(PAYLOAD_BUILTIN)
    return value if isinstance(value, dict) else None  # type: ignore[return-value]
