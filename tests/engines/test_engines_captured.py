"""Streams captured from the real services by public projects parse to exactly the right blocks.

Each capture in ``fixtures/captured/`` names its source repository, path and commit in its header and
is stored byte-for-byte after it (the header's ``chars`` is the source file's length).
"""

from __future__ import annotations

import re

import pytest
from engines_support import CAPTURED, captured, fixture_events, reduce, shape, sse_events, stream_text

from geppetto import StreamError
from geppetto.events import Usage
from geppetto.providers.anthropic import ClaudeStreamReducer
from geppetto.providers.gemini import GeminiStreamReducer
from geppetto.providers.openai_chat import ChatStreamReducer

CAPTURES = sorted(p.name for p in CAPTURED.iterdir())

GEMINI_CALL_SIGNATURE = (
    "EqUCCqICAb4+9vsh8Pd5taZVoPzSvjWWwzBrvhEQWBLCGa7IdY8FBMm7Z6dCKFU3Ft0la15gF7RaHe1NlPRygQec0bFwPDfMwGcUOMNiJiNIKxusCs4e"
    "jCZRuouNYQ4etEIt7CujEUHiILLfZXSJZYhs4UCrD2bLqPq0sE0lWgYJnzHkkKUOnMsA2hKffAhtF4DWn5INYj8pPssvch/2VpDFW2F9XSE04zLD"
    "zkIWF2eztJX50Y0lTehRZC3FW7fOrXCzGx+PwdataD6eXlF5O1zn+86XtmktOs2DEp4o1PMvXFFAXe8GGvPt8Idf3UtHMq7AsapwMW9sjiKj+FJk5"
    "4m+9LMTSaj7C86smfvoQryYBEHTVazr1bEnpl4bPG5JUtm2yAMkHj4="
)


@pytest.mark.parametrize("name", CAPTURES)
def test_every_capture_names_its_source_and_is_stored_whole(name: str) -> None:
    capture = captured(name)
    assert set(capture.meta) >= {"source", "path", "commit", "license", "format", "chars"}
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", capture.meta["source"])
    assert re.fullmatch(r"[0-9a-f]{40}", capture.meta["commit"])
    assert capture.meta["format"] in ("sse", "jsonl")
    assert len(capture.body) == int(capture.meta["chars"])


@pytest.mark.parametrize("name", CAPTURES)
def test_every_capture_parses_alike_with_any_line_end_and_in_small_pieces(name: str) -> None:
    text = stream_text(name)
    events = sse_events(text)
    assert events, "the capture holds events"
    crlf = text.replace("\r\n", "\n").replace("\n", "\r\n")  # how some servers frame events
    cr = text.replace("\r\n", "\n").replace("\n", "\r")
    assert sse_events(crlf) == events
    assert sse_events(cr) == events
    assert sse_events(crlf, chunk=7) == events  # pieces split CRLF pairs and UTF-8 characters


def test_anthropic_basic_text_stream() -> None:
    deltas, result = reduce(ClaudeStreamReducer(), fixture_events("anthropic_basic_response.sse"))
    assert deltas == [("text", "Hello"), ("text", " there"), ("text", "!")]
    assert shape(result.blocks) == [("llm_text", {"text": "Hello there!"})]
    assert (result.stop_reason, result.usage) == ("end_turn", Usage(input_tokens=11, output_tokens=6))
    assert result.response_id == "msg_4QpJur2dWWDjF6C758FbBw5vm12BaVipnK"


def test_anthropic_tool_use_stream() -> None:
    deltas, result = reduce(ClaudeStreamReducer(), fixture_events("anthropic_tool_use_response.sse"))
    assert deltas == [("text", "I"), ("text", "'ll check the current weather in Paris for you.")]
    assert shape(result.blocks) == [
        ("llm_text", {"text": "I'll check the current weather in Paris for you."}),
        (
            "tool_call",
            {
                "id": "toolu_01NRLabsLyVHZPKxbKvkfSMn",
                "name": "get_weather",
                "args": {"location": "Paris"},
                "extra": {"caller": {"type": "direct"}},  # a field geppetto does not model, sent back as it came
            },
        ),
    ]
    assert (result.stop_reason, result.usage) == ("tool_calls", Usage(input_tokens=377, output_tokens=65))
    assert result.response_id == "msg_019Q1hrJbZG26Fb9BQhrkHEr"


def test_anthropic_thinking_stream_keeps_the_signature() -> None:
    deltas, result = reduce(ClaudeStreamReducer(), fixture_events("anthropic_thinking.jsonl"))
    thinking = "The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185"
    assert "".join(text for kind, text in deltas if kind == "reasoning") == thinking
    assert [text for kind, text in deltas if kind == "text"] == ["925", " ÷ 5 ", "= 185"]
    signature = (
        "EvQBCkYICxgCKkAxhD4NUKFzudtZ6NzbZdEiBACIScTzqjPViM596iWLZIk4EFKYYBj3B6Ptl3b0dcQv/VeJBNbejNWIWRBn+KPNEgz6HWtKx7p+"
        "QRgKsEoaDGjsiqfht7gTRFYHiyIwD1VSmNqHxv3wy8KEMP+LYb/TC4UH3H97tuoaADARFFcA0phdfxnzKQxFnc9lwY+dKlzUsaKSUAFeu1bDL5ik"
        "ZJ1vL0Fkz6JjoFke0L/wOJRIUDUlDUOFJ1tZ3ea7g6LGE/5hwuvWgLwewdcm64d+43l7F57XrOmqNd6flI2K/oPr/4yzNgvi/EhT6Ca17BgB"
    )
    assert shape(result.blocks) == [
        ("reasoning", {"text": thinking, "signature": signature}),
        ("llm_text", {"text": "925 ÷ 5 = 185"}),
    ]
    assert (result.stop_reason, result.usage) == ("end_turn", Usage(input_tokens=69, output_tokens=53))
    assert result.response_id == "msg_01Y6V41gqPaKWEw7iPouH7iW"


def test_openai_chat_parallel_tool_calls_stream() -> None:
    deltas, result = reduce(ChatStreamReducer(), fixture_events("openai_chat_parallel_tool_calls.sse"))
    assert deltas == []
    assert shape(result.blocks) == [
        (
            "tool_call",
            {
                "id": "call_JMW1whyEaYG438VE1OIflxA2",
                "name": "GetWeatherArgs",
                "args": {"city": "Edinburgh", "country": "GB", "units": "c"},
            },
        ),
        (
            "tool_call",
            {
                "id": "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "name": "get_stock_price",
                "args": {"ticker": "AAPL", "exchange": "NASDAQ"},
            },
        ),
    ]
    assert (result.stop_reason, result.usage) == ("tool_calls", Usage(input_tokens=149, output_tokens=60))
    assert result.response_id == "chatcmpl-ABfwAwrNePHUgBBezonVC6MX3zd63"


def test_deepseek_reasoning_content_and_tool_call_stream() -> None:
    deltas, result = reduce(ChatStreamReducer(), fixture_events("deepseek_chat_reasoning_tool_call.jsonl"))
    reasoning = "The user asks about the weather in San Francisco. I should use the weather tool."
    assert "".join(text for _, text in deltas) == reasoning and {kind for kind, _ in deltas} == {"reasoning"}
    assert shape(result.blocks) == [
        ("reasoning", {"text": reasoning}),
        (
            "tool_call",
            {"id": "call_00_IhCAliIHtM9gKpgfqbBV9873", "name": "weather", "args": {"location": "San Francisco"}},
        ),
    ]
    usage = Usage(input_tokens=374, output_tokens=61, cached_tokens=256, reasoning_tokens=17)
    assert (result.stop_reason, result.usage) == ("tool_calls", usage)
    assert result.response_id == "6e77be01-935b-42f6-8b05-d6c763528589"


def test_gemini_function_call_stream_keeps_the_signature_on_the_call() -> None:
    deltas, result = reduce(GeminiStreamReducer(), fixture_events("gemini_function_call.jsonl"))
    assert deltas == []
    [call] = result.blocks
    assert call.kind.value == "tool_call" and call.payload.pop("id").startswith("call_")  # Gemini sent no id
    assert call.payload == {
        "name": "weather",
        "args": {"location": "San Francisco"},
        "thought_signature": GEMINI_CALL_SIGNATURE,
    }
    usage = Usage(input_tokens=29, output_tokens=15 + 45, reasoning_tokens=45)
    assert (result.stop_reason, result.usage, result.response_id) == ("tool_calls", usage, "b36LacjwM668nsEP2tbsgQQ")


def test_gemini_text_stream_keeps_the_trailing_signature_on_the_text() -> None:
    deltas, result = reduce(GeminiStreamReducer(), fixture_events("gemini_text_trailing_signature.jsonl"))
    assert deltas == [("text", "4")]
    signature = (
        "EpcCCpQCARFNMg9GpVP+YGO3zJobwN8a+4XBKHGs8ZZ75yF6E7qlkth0vQN/W+uyW0wG4BXMuGd5UQoWhKeHNJ0Sfvjllbr3qslp3saWpheAyYyh"
        "vNEq8LKFtwWitLNZTlhKEluBamAXS3WZJtDuIE4aP7BN7RYernnJz25fg0U42If5GVfHVMyg/Fov8cfHVbeOyEGb+nJ+QI+pKHu1alJuwm6YmZ2E"
        "STeR4Ghv63eSuLm2P3rPvPRCDwbHGr/uCXlNBH4evvuPSSPYRzpjvxPsXhbKQif6eh5UqHHIgE3q2tJdGsWk+WKMEOqbK72nnVw8pUNFQtWINK3M"
        "P/R+Ho0s7+2ZQHZ9wdP3SfrHsdb1BCb3EKzl6rKM"
    )
    assert shape(result.blocks) == [("llm_text", {"text": "4", "thought_signature": signature})]
    usage = Usage(input_tokens=15, output_tokens=1 + 52, reasoning_tokens=52)
    assert (result.stop_reason, result.usage, result.response_id) == ("end_turn", usage, "vQRpaqzAPN2M9MoPxPq2uQ4")


def test_a_gemini_stream_cut_after_the_call_but_before_finish_reason_runs_no_call() -> None:
    """The call arrived whole, but without a finishReason the response may still be retracted or blocked."""
    call_chunk, _finish = fixture_events("gemini_function_call.jsonl")
    reducer = GeminiStreamReducer()
    assert reducer.feed(call_chunk) == [] and not reducer.finished
    with pytest.raises(StreamError, match="before a finishReason; no tool call was run") as info:
        reducer.result()
    assert "tool calls not yet confirmed by a finishReason (weather)" in str(info.value)
    assert reducer.completed_blocks() == []
