"""Content the engines do not model is kept as it came and goes back only to its own provider.

Claude content blocks and Gemini parts (server tools, MCP, compaction, code execution, images, bare
signatures) become ``other`` blocks holding them exactly; built-in tool ones are typed under
``payload["builtin"]`` and announced by an ``EventBuiltinTool``; citations, logprobs and ``phase`` stay
on the text; ``builtin_tools=`` enables each provider's own tools.
"""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest
from engines_support import from_provider, reduce, sse_events

from geppetto import Block, Turn, UsageError
from geppetto.events import EventBuiltinTool, EventCitations, EventMetadata, TextPrinter, with_sinks
from geppetto.providers.anthropic import ClaudeEngine, ClaudeStreamReducer
from geppetto.providers.anthropic import build_request as claude_request
from geppetto.providers.gemini import GeminiEngine, GeminiStreamReducer
from geppetto.providers.gemini import build_request as gemini_request
from geppetto.providers.openai_responses._answer import item_to_block
from geppetto.providers.openai_responses._items import blocks_to_items
from geppetto.turns import PAYLOAD_CITATIONS, PAYLOAD_PHASE, BlockKind, builtin_of, raw_block

SEARCH = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "news"}}
RESULTS = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [{"type": "web_search_result", "title": "CNN", "url": "https://cnn.com", "encrypted_content": "E1"}],
}
CITATION = {"type": "web_search_result_location", "cited_text": "x", "url": "https://cnn.com", "title": "CNN"}


def _sse(*events: dict[str, Any]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


CLAUDE_STREAM = _sse(
    {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {"input_tokens": 3}}},
    {"type": "content_block_start", "index": 0, "content_block": {**SEARCH, "input": {}}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"query"'}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": ': "news"}'}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": RESULTS},
    {"type": "content_block_stop", "index": 1},
    {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": "", "citations": []}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "citations_delta", "citation": CITATION}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "It rained."}},
    {"type": "content_block_stop", "index": 2},
    {"type": "content_block_start", "index": 3, "content_block": {"type": "compaction", "content": ""}},
    {"type": "content_block_delta", "index": 3, "delta": {"type": "compaction_delta", "content": "Earlier: "}},
    {"type": "content_block_delta", "index": 3, "delta": {"type": "compaction_delta", "content": "news asked."}},
    {"type": "content_block_stop", "index": 3},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}},
    {"type": "message_stop"},
)


def _claude_blocks() -> list[Block]:
    _, result = reduce(ClaudeStreamReducer(), sse_events(CLAUDE_STREAM))
    return [from_provider(b, "anthropic") for b in result.blocks]


def test_claude_server_tool_blocks_and_compaction_are_kept_whole_from_a_stream() -> None:
    call, results, text, compaction = _claude_blocks()
    assert (call.kind, results.kind, text.kind, compaction.kind) == (
        BlockKind.OTHER,
        BlockKind.OTHER,
        BlockKind.LLM_TEXT,
        BlockKind.OTHER,
    )
    assert call.payload["item"] == SEARCH  # the streamed input parsed into the block
    assert results.payload["item"] == RESULTS
    assert compaction.payload["item"] == {"type": "compaction", "content": "Earlier: news asked."}
    assert text.payload[PAYLOAD_CITATIONS] == [CITATION]
    assert builtin_of(call) == {
        "tool": "web_search",
        "phase": "call",
        "call_id": "srvtoolu_1",
        "name": "web_search",
        "input": {"query": "news"},
    }
    assert builtin_of(results) == {
        "tool": "web_search",
        "phase": "result",
        "call_id": "srvtoolu_1",
        "sources": [{"url": "https://cnn.com", "title": "CNN"}],
    }
    assert builtin_of(compaction) is None


def test_claude_sends_its_own_kept_blocks_back_exactly_and_leaves_others_out() -> None:
    turn = Turn(blocks=[Block.user("News?"), *_claude_blocks()])
    foreign = from_provider(raw_block({"type": "web_search_call", "id": "ws_1"}), "openai")
    foreign_text = from_provider(Block.llm_text("From OpenAI."), "openai")
    foreign_text.payload[PAYLOAD_CITATIONS] = [{"type": "url_citation", "url": "https://x"}]
    turn.extend([foreign, foreign_text, Block.user("More?")])
    messages = claude_request(turn, model="claude-sonnet-4-5", tools=[])["messages"]
    assert messages[1]["content"] == [
        SEARCH,
        RESULTS,
        {"type": "text", "text": "It rained.", "citations": [CITATION]},
        {"type": "compaction", "content": "Earlier: news asked."},
        {"type": "text", "text": "From OpenAI."},  # another provider's citations are not Claude's to take
    ]


async def test_claude_announces_built_in_tools_and_the_printer_shows_them() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=CLAUDE_STREAM.encode())

    engine = ClaudeEngine(
        "claude-sonnet-4-5", api_key="k", http=httpx.AsyncClient(transport=httpx.MockTransport(answer))
    )
    events: list[Any] = []
    out = io.StringIO()
    printer = TextPrinter(out)
    from geppetto.events import with_sinks

    with with_sinks(events.append, printer):
        await engine.run_inference(Turn(blocks=[Block.user("News?")]))
    announced = [(e.tool, e.phase, e.call_id) for e in events if isinstance(e, EventBuiltinTool)]
    assert announced == [("web_search", "call", "srvtoolu_1"), ("web_search", "result", "srvtoolu_1")]
    assert '⚙ web_search({"query": "news"})' in out.getvalue()
    assert "⚙ web_search: 1 sources" in out.getvalue()


def test_claude_builtin_tools_go_out_after_the_function_tools() -> None:
    from geppetto.providers._streaming import ToolSpec

    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    body = claude_request(
        Turn(blocks=[Block.user("hi")]), model="claude-sonnet-4-5", tools=[ToolSpec("f")], builtin_tools=[search]
    )
    assert [t.get("type", "function") for t in body["tools"]] == ["function", "web_search_20250305"]
    assert body["tools"][1] == search


def test_a_builtin_tool_that_is_not_the_providers_own_definition_is_refused_naming_the_form() -> None:
    with pytest.raises(UsageError, match=r"Claude's own tool definitions \(dicts such as \{\"type\""):
        claude_request(Turn(blocks=[Block.user("hi")]), model="claude", tools=[], builtin_tools=["web_search"])  # type: ignore[list-item]
    with pytest.raises(UsageError, match=r"Gemini's own tool definitions .*googleSearch"):
        gemini_request(Turn(blocks=[Block.user("hi")]), tools=[], builtin_tools=[{"name": "search"}])
    with pytest.raises(UsageError, match="Claude's own tool definitions"):  # another provider's form
        claude_request(Turn(blocks=[Block.user("hi")]), model="claude", tools=[], builtin_tools=[{"googleSearch": {}}])
    with pytest.raises(UsageError, match="Gemini's own tool definitions"):
        gemini_request(Turn(blocks=[Block.user("hi")]), tools=[], builtin_tools=[{"type": "web_search_20250305"}])


GEMINI_CHUNKS = [
    {
        "responseId": "r1",
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"executableCode": {"language": "PYTHON", "code": "print(2)"}, "thoughtSignature": "sig-code"},
                        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "2\n"}},
                        {
                            "toolCall": {"id": "t1", "toolType": "GOOGLE_SEARCH_WEB", "args": {"queries": ["q"]}},
                            "thoughtSignature": "sig-tool",
                        },
                    ],
                },
                "index": 0,
            }
        ],
    },
    {
        "responseId": "r1",
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "Two."}, {"thoughtSignature": "sig-bare"}]},
                "finishReason": "STOP",
                "groundingMetadata": {"webSearchQueries": ["q"]},
                "avgLogprobs": -0.5,
                "index": 0,
            }
        ],
    },
]


def _gemini_blocks() -> list[Block]:
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in GEMINI_CHUNKS)
    _, result = reduce(GeminiStreamReducer(), sse_events(text))
    return [from_provider(b, "gemini") for b in result.blocks]


def test_gemini_non_text_parts_are_kept_whole_with_their_own_signatures() -> None:
    code, output, search, text, bare = _gemini_blocks()
    parts = GEMINI_CHUNKS[0]["candidates"][0]["content"]["parts"]  # type: ignore[index]
    assert [code.payload["item"], output.payload["item"], search.payload["item"]] == parts
    assert bare.payload["item"] == {"thoughtSignature": "sig-bare"}  # never moved onto the text before it
    assert text.kind is BlockKind.LLM_TEXT and "thought_signature" not in text.payload
    assert text.payload[PAYLOAD_CITATIONS] == {"groundingMetadata": {"webSearchQueries": ["q"]}}
    assert text.payload["logprobs"] == {"avgLogprobs": -0.5}
    assert [(builtin_of(b) or {}).get("tool") for b in (code, output, search)] == [
        "code_execution",
        "code_execution",
        "web_search",
    ]


async def test_gemini_grounding_of_an_image_only_answer_stays_on_the_image() -> None:
    image = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}, "thoughtSignature": "sig-img"}
    grounding = {
        "webSearchQueries": ["paris skyline"],
        "groundingChunks": [{"web": {"uri": "https://example.com/paris", "title": "Paris"}}],
    }
    answer = {
        "responseId": "r2",
        "candidates": [
            {"content": {"role": "model", "parts": [image]}, "finishReason": "STOP", "groundingMetadata": grounding}
        ],
    }
    engine = GeminiEngine(
        "gemini-3-pro-image-preview",
        api_key="k",
        stream=False,
        http=httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200, json=answer))),
    )
    events: list[Any] = []
    with with_sinks(events.append):
        turn = await engine.run_inference(Turn(blocks=[Block.user("Draw the Paris skyline as it is today")]))
    (kept,) = turn.blocks[1:]
    assert kept.kind is BlockKind.OTHER and kept.payload["item"] == image
    assert kept.payload[PAYLOAD_CITATIONS] == {"groundingMetadata": grounding}
    (cited,) = [e for e in events if isinstance(e, EventCitations)]
    assert [c["url"] for c in cited.citations] == ["https://example.com/paris"]
    turn.append(Block.user("Brighter"))
    assert gemini_request(turn, tools=[])["contents"][1] == {"role": "model", "parts": [image]}  # output only


def test_gemini_sends_its_own_parts_back_exactly_and_leaves_others_out() -> None:
    foreign = from_provider(
        raw_block({"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}), "anthropic"
    )
    turn = Turn(blocks=[Block.user("2?"), *_gemini_blocks(), foreign, Block.user("thanks")])
    contents = gemini_request(turn, tools=[])["contents"]
    parts = GEMINI_CHUNKS[0]["candidates"][0]["content"]["parts"]  # type: ignore[index]
    assert contents[1] == {
        "role": "model",
        "parts": [*parts, {"text": "Two."}, {"thoughtSignature": "sig-bare"}],
    }


async def test_gemini_whole_answers_come_from_generate_content() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=GEMINI_CHUNKS[1])

    engine = GeminiEngine(
        "gemini-2.5-flash", api_key="k", stream=False, http=httpx.AsyncClient(transport=httpx.MockTransport(answer))
    )
    turn = await engine.run_inference(Turn(blocks=[Block.user("2?")]))
    assert seen[0].url.path == "/v1beta/models/gemini-2.5-flash:generateContent" and not seen[0].url.query
    assert [b.kind for b in turn.blocks[1:]] == [BlockKind.LLM_TEXT, BlockKind.OTHER]


def test_responses_messages_keep_annotations_logprobs_and_phase_and_send_what_the_wire_takes() -> None:
    annotation = {"type": "url_citation", "url": "https://x", "title": "X", "start_index": 0, "end_index": 1}
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "phase": "final_answer",
        "content": [{"type": "output_text", "text": "Hi", "annotations": [annotation], "logprobs": []}],
    }
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc"}
    block = from_provider(item_to_block(message), "openai")  # type: ignore[arg-type]
    assert (block.payload[PAYLOAD_CITATIONS], block.payload[PAYLOAD_PHASE]) == ([annotation], "final_answer")
    # Without its reasoning the message goes without an id, so only its text and phase can travel.
    assert blocks_to_items([block]) == [{"role": "assistant", "content": "Hi", "phase": "final_answer"}]
    paired = [from_provider(item_to_block(reasoning), "openai"), block]  # type: ignore[arg-type]
    assert blocks_to_items(paired)[1] == message


def test_the_text_printer_shows_a_failed_builtin_result() -> None:
    out = io.StringIO()
    TextPrinter(out)(EventBuiltinTool(EventMetadata(), call_id="c", tool="code_execution", phase="result", error=True))
    assert out.getvalue() == "⚙ code_execution: error\n"


def test_a_gemini_text_part_with_a_field_geppetto_has_no_name_for_stays_text_and_goes_back_with_it() -> None:
    chunk = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [{"text": "A"}, {"text": "B", "partMetadata": {"k": 1}}, {"text": "C"}],
                },
                "finishReason": "STOP",
            }
        ]
    }
    deltas, result = reduce(GeminiStreamReducer(), sse_events(f"data: {json.dumps(chunk)}\n\n"))
    assert deltas == [("text", "A"), ("text", "B"), ("text", "C")]
    blocks = [from_provider(b, "gemini") for b in result.blocks]
    assert [(b.text, b.payload.get("extra")) for b in blocks] == [
        ("A", None),
        ("B", {"partMetadata": {"k": 1}}),
        ("C", None),
    ]
    parts = gemini_request(Turn(blocks=[Block.user("?"), *blocks]), tools=[])["contents"][1]["parts"]
    assert parts == [{"text": "A"}, {"text": "B", "partMetadata": {"k": 1}}, {"text": "C"}]


def test_the_typed_server_tool_helpers_are_each_providers_own_definitions() -> None:
    from geppetto.providers.anthropic import server_tools as claude_tools
    from geppetto.providers.gemini import server_tools as gemini_tools

    claude = ClaudeEngine(
        "claude-sonnet-4-5",
        api_key="k",
        builtin_tools=[claude_tools.web_search(max_uses=2, allowed_domains=["a.org"]), claude_tools.code_execution()],
    )
    assert claude.build_request(Turn(blocks=[Block.user("hi")]))["tools"] == [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 2, "allowed_domains": ["a.org"]},
        {"type": "code_execution_20250825", "name": "code_execution"},
    ]
    gemini = GeminiEngine(
        "gemini-2.5-flash", api_key="k", builtin_tools=[gemini_tools.google_search(), gemini_tools.url_context()]
    )
    assert gemini.build_request(Turn(blocks=[Block.user("hi")]))["tools"] == [{"googleSearch": {}}, {"urlContext": {}}]


def test_chat_fields_without_a_name_go_back_only_to_the_server_that_sent_them() -> None:
    from geppetto.providers.openai_chat import ChatStreamReducer
    from geppetto.providers.openai_chat import build_request as chat_request

    google = "https://generativelanguage.googleapis.com/v1beta/openai"
    signed = {"google": {"thought_signature": "sig"}}
    chunk = {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "role": "assistant",
                    "extra_content": signed,
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c1",
                            "type": "function",
                            "extra_content": signed,
                            "function": {"name": "now", "arguments": "{}"},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    _, result = reduce(ChatStreamReducer(server=google), sse_events(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"))
    turn = Turn(blocks=[Block.user("time?"), *(from_provider(b, "openai_chat") for b in result.blocks)])
    back = chat_request(turn, model="gemini-3-flash", tools=[], server=google)["messages"][1]
    assert back == {
        "extra_content": signed,
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"extra_content": signed, "id": "c1", "type": "function", "function": {"name": "now", "arguments": "{}"}}
        ],
    }
    elsewhere = chat_request(turn, model="gpt-4o", tools=[], server="https://api.openai.com/v1")["messages"][1]
    assert "extra_content" not in elsewhere and "extra_content" not in elsewhere["tool_calls"][0]
