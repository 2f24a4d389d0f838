"""The citations of a provider call's text as one event, in the form every stream shows
(:func:`geppetto.turns.citation_sources`)."""

from __future__ import annotations

from ..events import EventCitations, EventMetadata, publish
from ..turns import PAYLOAD_CITATIONS, Block, BlockKind, citation_sources

__all__ = ["publish_citations"]


def publish_citations(meta: EventMetadata, blocks: list[Block]) -> None:
    """An :class:`~geppetto.events.EventCitations` with what the text blocks among ``blocks`` cite, when
    they cite anything."""
    found = [
        c
        for block in blocks
        if block.kind is BlockKind.LLM_TEXT and block.payload.get(PAYLOAD_CITATIONS)
        for c in citation_sources(block.payload[PAYLOAD_CITATIONS])
    ]
    if found:
        publish(EventCitations(meta, citations=found))
