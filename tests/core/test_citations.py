"""One normalizer for every provider's citations (``geppetto.turns.citation_sources``) and the ``citations``
event a provider call publishes with them: the recorded answers' annotations and citations as the engines
keep them on text blocks (Responses annotations, Claude citations, Gemini grounding metadata), and the forms
the recordings lack (Chat annotations, Claude document citations, Gemini citation and URL metadata)."""

from __future__ import annotations

from typing import Any

import pytest

from geppetto.events import Event, EventCitations, EventMetadata, with_sinks
from geppetto.providers._citations import publish_citations
from geppetto.turns import PAYLOAD_CITATIONS, Block, citation_sources, source_key
from recorded import MISSING, ROOT, exchanges

recorded = pytest.mark.skipif(not ROOT.is_dir(), reason=MISSING)


def _answer(name: str) -> dict[str, Any]:
    [exchange] = [e for e in exchanges() if e.name == name]
    assert isinstance(exchange.answer, dict)
    return exchange.answer


def _responses(name: str) -> list[Any]:
    """The annotations of a recorded Responses answer's message, as the engine keeps them on its text."""
    output = _answer(f"cassettes/test_openai_responses/{name}")["output"]
    return [a for item in output if item["type"] == "message" for p in item["content"] for a in p["annotations"]]


def _cited(raw: Any) -> list[dict[str, Any]]:
    """The ``citations`` events published for a text block holding ``raw``."""
    block = Block.llm_text("answer")
    block.payload[PAYLOAD_CITATIONS] = raw
    events: list[Event] = []
    with with_sinks(events.append):
        publish_citations(EventMetadata(provider="p"), [Block.user("q"), block])
    assert all(isinstance(e, EventCitations) for e in events)
    return [e.to_dict() for e in events]


@recorded
def test_responses_url_file_and_container_file_citations() -> None:
    [url] = citation_sources(_responses("test_openai_responses_model_web_search_tool_without_external_access.yaml#0"))
    assert url == {
        "url": "https://www.toureiffel.paris/en/news/history-and-culture/133-years-and-1083-feet?utm_source=openai",
        "title": "133 years and 330 metres - The Eiffel Tower",
        "start": 5,
        "end": 125,
    }
    [file] = citation_sources(_responses("test_openai_responses_model_file_search_tool.yaml#4"))
    assert file == {"document": "file-U6Ke78qu8nkANsrCrjoYBr", "title": "tmp2zuepgia.txt"}
    images = citation_sources(_responses("test_openai_responses_code_execution_return_image.yaml#0"))
    assert images[1] == {
        "document": "cfile_68cdc39bba888191b47ed8bda6111395",
        "title": "y_equals_x_squared.png",
        "start": 94,
        "end": 134,
    }


@recorded
def test_claude_web_search_citations_keep_the_cited_text() -> None:
    content = _answer("cassettes/test_anthropic/test_anthropic_web_search_tool.yaml#0")["content"]
    raw = [c for block in content if block["type"] == "text" for c in block.get("citations") or []]
    found = citation_sources(raw)
    assert len(found) == len(raw) > 1
    assert found[0] == {
        "url": "https://www.accuweather.com/en/us/san-francisco/94103/weather-forecast/347629",
        "title": "San Francisco, CA Weather Forecast | AccuWeather",
        "cited_text": raw[0]["cited_text"],
    }
    assert all("encrypted_index" not in c for c in found)
    assert len({source_key(c) for c in found}) < len(found)  # a source cited again is listed again


@recorded
def test_gemini_grounding_spans_and_file_search_passages() -> None:
    candidate = _answer("cassettes/test_google/test_google_model_web_search_tool.yaml#0")["candidates"][0]
    grounding = candidate["groundingMetadata"]
    found = citation_sources({"groundingMetadata": grounding})
    supports = grounding["groundingSupports"]
    assert len(found) == sum(len(s["groundingChunkIndices"]) for s in supports)
    first_chunk = grounding["groundingChunks"][supports[0]["groundingChunkIndices"][0]]["web"]
    assert found[0] == {"url": first_chunk["uri"], "title": first_chunk["title"], "start": 55, "end": 216}
    candidate = _answer("cassettes/test_google/test_google_model_file_search_tool.yaml#4")["candidates"][0]
    [passage, unsupported] = citation_sources({"groundingMetadata": candidate["groundingMetadata"]})
    store = "fileSearchStores/testfilesearchstore-q7prdj5dqu8p"
    text = "Paris is the capital of France. The Eiffel Tower is a famous landmark in Paris."
    assert passage == {"document": store, "cited_text": text, "start": 0, "end": 85}  # a zero start is left out
    assert unsupported == {"document": store, "cited_text": text}


def test_chat_annotations_claude_documents_and_gemini_citation_metadata() -> None:
    chat = [{"type": "url_citation", "url_citation": {"url": "https://a.example/", "title": "A", "start_index": 0}}]
    assert citation_sources(chat) == [{"url": "https://a.example/", "title": "A"}]  # a span needs both ends
    claude = [
        {
            "type": "char_location",
            "cited_text": "x",
            "document_index": 0,
            "document_title": "Report",
            "start_char_index": 3,
        },
        {"type": "page_location", "cited_text": "y", "document_index": 1, "document_title": None},
        {"type": "search_result_location", "cited_text": "z", "source": "https://b.example/", "title": "B"},
    ]
    assert citation_sources(claude) == [
        {"document": "Report", "title": "Report", "cited_text": "x"},
        {"document": "document 1", "cited_text": "y"},
        {"url": "https://b.example/", "title": "B", "cited_text": "z"},
    ]
    gemini = {
        "citationMetadata": {"citations": [{"startIndex": 2, "endIndex": 9, "uri": "https://c.example/"}]},
        "urlContextMetadata": {"urlMetadata": [{"retrievedUrl": "https://d.example/", "urlRetrievalStatus": "OK"}]},
    }
    assert citation_sources(gemini) == [
        {"url": "https://c.example/", "start": 2, "end": 9},
        {"url": "https://d.example/"},
    ]


def test_what_names_no_source_is_left_out() -> None:
    assert citation_sources(None) == citation_sources("text") == citation_sources([1, None, {}]) == []
    assert citation_sources({"groundingMetadata": {"groundingChunks": [{}], "groundingSupports": [{}]}}) == []
    assert _cited([]) == _cited({"groundingMetadata": {}}) == []  # nothing cited: no event


@recorded
def test_the_event_carries_the_normalized_citations_of_every_text_block() -> None:
    raw = _responses("test_openai_responses_model_web_search_tool_without_external_access.yaml#0")
    [event] = _cited(raw)
    assert event["type"] == "citations" and event["metadata"] == {"provider": "p"}
    assert event["citations"] == citation_sources(raw)
    block = Block.llm_text("more")
    block.payload[PAYLOAD_CITATIONS] = [{"type": "web_search_result_location", "url": "https://e.example/"}]
    events: list[Event] = []
    with with_sinks(events.append):
        publish_citations(EventMetadata(), [Block.llm_text("uncited"), block, Block.llm_text("x")])
    assert [e.to_dict()["citations"] for e in events] == [[{"url": "https://e.example/"}]]
