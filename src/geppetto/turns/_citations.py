"""What a text block cites, in one form for every provider.

A text block keeps its citations as the provider sent them under ``payload["citations"]``: a list of
Responses annotations (``url_citation``, ``file_citation``, ``container_file_citation``, ``file_path``),
Chat annotations (``{"type": "url_citation", "url_citation": {...}}``) or Claude citations
(``web_search_result_location``, ``char_location``, ``page_location``, ``content_block_location``,
``search_result_location``), or Gemini's candidate metadata (a dict with ``groundingMetadata``,
``citationMetadata``, ``urlContextMetadata``). :func:`citation_sources` reads all of them; the event
streams and the web page show what it returns."""

from __future__ import annotations

from typing import Any

__all__ = ["citation_sources", "source_key"]


def _web(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(("http://", "https://"))


def _entry(
    where: Any, title: Any = None, cited: Any = None, start: Any = None, end: Any = None
) -> dict[str, Any] | None:
    """One normalized citation: ``url`` for a web address, else ``document``; None when it names nothing."""
    where = str(where or "") or str(title or "")
    if not where:
        return None
    out: dict[str, Any] = {"url": where} if _web(where) else {"document": where}
    if title:
        out["title"] = str(title)
    if cited:
        out["cited_text"] = str(cited)
    if isinstance(start, int) and isinstance(end, int):
        out["start"], out["end"] = start, end
    return out


def _from_item(c: dict[str, Any]) -> dict[str, Any] | None:
    """A Responses or Chat annotation, or a Claude citation."""
    nested = c.get(str(c.get("type") or ""))
    if isinstance(nested, dict):  # Chat's {"type": "url_citation", "url_citation": {...}}
        c = {**c, **nested}
    url = c.get("url") if _web(c.get("url")) else c.get("source") if _web(c.get("source")) else None
    title = c.get("title") or c.get("document_title") or c.get("filename")
    where = url or c.get("file_id") or c.get("source") or c.get("url")
    if not where and not title and isinstance(c.get("document_index"), int):
        where = f"document {c['document_index']}"  # Claude's documents are numbered as the request sent them
    return _entry(where, title, c.get("cited_text"), c.get("start_index"), c.get("end_index"))


def _from_gemini(raw: dict[str, Any]) -> list[dict[str, Any] | None]:
    """Gemini's grounding chunks (with the spans of the answer their supports cover), citations and
    fetched URLs."""
    grounding = raw.get("groundingMetadata") or {}
    chunks = []
    for chunk in grounding.get("groundingChunks") or []:
        chunk = chunk if isinstance(chunk, dict) else {}
        source = chunk.get("web") or chunk.get("retrievedContext") or chunk.get("maps") or {}
        # a file search's passage may name only its store (``fileSearchStore``) or document
        where = source.get("uri") or source.get("documentName") or source.get("fileSearchStore")
        chunks.append((where, source.get("title"), source.get("text")))
    out: list[dict[str, Any] | None] = []
    supported: set[int] = set()
    for support in grounding.get("groundingSupports") or []:
        segment = support.get("segment") or {}
        for i in support.get("groundingChunkIndices") or []:
            if isinstance(i, int) and 0 <= i < len(chunks):
                supported.add(i)
                start = segment.get("startIndex", 0)  # a zero start is left out of the JSON
                out.append(_entry(*chunks[i], start, segment.get("endIndex")))
    out += [_entry(*chunk) for i, chunk in enumerate(chunks) if i not in supported]
    for c in (raw.get("citationMetadata") or {}).get("citations") or []:
        out.append(_entry(c.get("uri"), c.get("title"), None, c.get("startIndex", 0), c.get("endIndex")))
    for u in (raw.get("urlContextMetadata") or {}).get("urlMetadata") or []:
        out.append(_entry(u.get("retrievedUrl")))
    return out


def citation_sources(raw: Any) -> list[dict[str, Any]]:
    """The citations ``raw`` (a text block's ``payload["citations"]``, in any provider's form) as
    ``{"url" | "document", "title"?, "cited_text"?, "start"?, "end"?}`` dicts in the provider's order:
    ``url`` a web address, ``document`` a provider's file id or a document's title; ``cited_text`` the
    quoted text and ``start`` / ``end`` the span of the answer's text that cites it, when the provider gives
    them. A source cited several times is listed each time (see :func:`source_key`); what names no source is
    left out."""
    if isinstance(raw, list):
        found = [_from_item(c) for c in raw if isinstance(c, dict)]
    elif isinstance(raw, dict):
        found = _from_gemini(raw)
    else:
        found = []
    return [c for c in found if c is not None]


def source_key(citation: dict[str, Any]) -> str:
    """What a normalized citation cites (its ``url`` or ``document``): one source however often cited."""
    return str(citation.get("url") or citation.get("document") or "")
