"""SSEDecoder: the byte-level SSE parser under every engine's stream (line ends, chunk boundaries, Unicode)."""

from __future__ import annotations

import itertools
import json

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

import geppetto as gp
from geppetto.providers._sse import SSEDecoder, SSEEvent
from geppetto.providers.openai_responses import ResponsesEngine

# Valid unescaped inside a JSON string, and each a line break to str.splitlines (so to httpx's aiter_lines).
SPLITLINES_BREAKS = "\u2028\u2029\u0085\x0b\x0c\x1c\x1d\x1e"


def _decode(chunks: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events = [e for chunk in chunks for e in decoder.feed(chunk)]
    return events + decoder.flush()


def _frame(event: str, data: dict[str, object], end: str = "\n") -> str:
    return f"event: {event}{end}data: {json.dumps(data, ensure_ascii=False)}{end}{end}"


def test_characters_that_splitlines_breaks_on_stay_inside_the_data() -> None:
    text = f"a{SPLITLINES_BREAKS}b é 😀"
    body = _frame("response.output_text.delta", {"delta": text}).encode()
    events = _decode([body])
    assert [e.event for e in events] == ["response.output_text.delta"]
    assert events[0].json() == {"delta": text}


def test_crlf_cr_and_lf_line_ends_multiline_data_comments_bom_and_an_unterminated_end() -> None:
    body = "\ufeff: comment\r\nevent: a\r\ndata: 1\r\ndata:2\r\n\r\nid: 9\rdata: x\r\revent: only-name\n\nevent: last\ndata: tail"
    assert _decode([body.encode()]) == [
        SSEEvent("a", "1\n2"),
        SSEEvent("", "x", "9"),
        SSEEvent("last", "tail"),
    ]


STREAM = (
    "\ufeff"
    + _frame("one", {"delta": "caf\u00e9 \U0001f600 \u2028"}, "\r\n")
    + _frame("two", {"delta": "x"}, "\r")
    + ": keep-alive\n"
    + _frame("three", {"delta": "\u0085\u2029"}, "\n")
).encode()
WHOLE = _decode([STREAM])


def test_the_reference_stream_parses_to_three_events() -> None:
    assert [e.event for e in WHOLE] == ["one", "two", "three"]
    assert WHOLE[0].json() == {"delta": "caf\u00e9 \U0001f600 \u2028"}


def test_every_split_point_gives_the_same_events() -> None:
    for i in range(len(STREAM) + 1):
        assert _decode([STREAM[:i], STREAM[i:]]) == WHOLE, f"split at byte {i}"
    assert _decode([bytes([b]) for b in STREAM]) == WHOLE


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_chunking_gives_the_same_events(cuts: list[int]) -> None:
    points = [0, *sorted(cuts), len(STREAM)]
    assert _decode([STREAM[a:b] for a, b in itertools.pairwise(points)]) == WHOLE


def _completed(text: str) -> bytes:
    message = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    response = {"id": "resp_1", "object": "response", "status": "completed", "model": "m", "output": [message]}
    frames = [
        _frame("response.created", {"type": "response.created", "response": {**response, "output": []}}),
        _frame("response.output_text.delta", {"type": "response.output_text.delta", "delta": text}),
        _frame("response.completed", {"type": "response.completed", "response": response}),
    ]
    return "".join(frames).encode()


async def test_a_reply_holding_a_line_separator_reaches_the_turn_whole() -> None:
    text = "first\u2028second\u2029third"
    body = _completed(text)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        engine = ResponsesEngine("m", api_key="k", http=client, mode="stateless")
        turn = gp.Turn()
        turn.append(gp.Block.user("hi"))
        out = await engine.run_inference(turn)
    assert [b.text for b in out.blocks if b.kind is gp.BlockKind.LLM_TEXT] == [text]
