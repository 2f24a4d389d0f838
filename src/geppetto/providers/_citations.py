"""The citations of a provider call's text as one event, in the form every stream shows
(:func:`geppetto.turns.citation_sources`)."""

from __future__ import annotations

from ..events import EventCitations, EventMetadata, publish
from ..turns import PAYLOAD_CITATIONS, Block, BlockKind, citation_sources

__all__ = ["publish_citations"]

_CITING = (BlockKind.LLM_TEXT, BlockKind.OTHER)


def publish_citations(meta: EventMetadata, blocks: list[Block]) -> None:
    """An :class:`~geppetto.events.EventCitations` with what the text blocks among ``blocks`` cite (and a
    kept part standing for an answer without text, such as Gemini's generated image), when they cite
    anything."""
    found = [
        c
        for block in blocks
        if block.kind in _CITING and block.payload.get(PAYLOAD_CITATIONS)
        for c in citation_sources(block.payload[PAYLOAD_CITATIONS])
    ]
    if found:
        publish(EventCitations(meta, citations=found))
