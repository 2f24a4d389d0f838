"""Background responses (``ResponsesEngine(background=True)``) against the simulator and recorded traffic: a
stream cut three times resumes by ``sequence_number`` to one response with no block twice, a resume that
repeats events publishes each once, polling past the resume window, cancel mid-run, and a response that did
not finish never anchors."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai.types.responses.response_create_params import ResponseCreateParamsStreaming
from pydantic import TypeAdapter
from responses_support import assert_valid_requests, engine
from typing_extensions import get_type_hints

from geppetto import ConfigurationError, ProviderError, StreamError
from geppetto.events import Event, with_sinks
from geppetto.providers._background import PENDING_RESPONSE, PendingResponse
from geppetto.providers.openai_responses import get_state
from geppetto.providers.openai_responses._answer import not_an_anchor
from geppetto.providers.openai_responses._send import Cursor
from geppetto.simulator import Reply, Simulator
from geppetto.turns import BLOCK_META_RESPONSE_ID, TURN_META_USAGE, Block, BlockKind, Turn

RECORDED = Path(__file__).with_name("fixtures") / "background_stream.sse"
LONG = " ".join(f"word{i}" for i in range(40))


def _turn(text: str = "Tell me a long story") -> Turn:
    turn = Turn()
    turn.append(Block.user(text))
    return turn


def _texts(turn: Turn) -> list[str]:
    return [b.text for b in turn.blocks if b.kind is BlockKind.LLM_TEXT]


def _gets(sim: Simulator) -> list[dict[str, str]]:
    return [r.query for r in sim.requests if r.method == "GET"]


async def test_a_background_run_cut_three_times_completes_as_one_response(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text=LONG), Reply(text="Next."))
    sim.fail_next(drop_after=6, times=3)  # the create stream and the first two resumes break
    events: list[Event] = []
    eng = engine(sim, background=True)
    with with_sinks(events.append):
        turn = await eng.run_inference(_turn())
    assert _texts(turn) == [LONG], "one message, its text whole"
    deltas = "".join(e.delta for e in events if e.type == "text_delta")  # type: ignore[attr-defined]
    assert deltas == LONG, "every delta published once"
    posted = sim.requests[0].body
    assert (posted["background"], posted["store"], posted["stream"]) == (True, True, True)
    TypeAdapter(ResponseCreateParamsStreaming).validate_python(posted)  # the SDK's request type takes it
    assert set(posted) <= set(get_type_hints(ResponseCreateParamsStreaming)), "no key the SDK does not declare"
    rid = turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]
    assert [r.path for r in sim.requests] == ["/v1/responses"] + [f"/v1/responses/{rid}"] * 3
    assert _gets(sim) == [
        {"stream": "true", "starting_after": "5"},
        {"stream": "true", "starting_after": "11"},
        {"stream": "true", "starting_after": "17"},
    ]
    assert get_state(turn).previous_response_id == rid, "the finished response is the anchor"
    assert TURN_META_USAGE.get(turn.metadata)["output_tokens"] > 0
    # the next request chains on it, and the server's context is the Turn's
    turn.append(Block.user("And then?"))
    turn = await eng.run_inference(turn)
    assert sim.requests[-1].body["previous_response_id"] == rid
    assert _texts(turn) == [LONG, "Next."]
    assert_valid_requests(sim)


async def test_a_resume_that_repeats_events_publishes_each_once() -> None:
    """Recorded traffic: the stream breaks after 8 events; the resume (a server that ignores
    ``starting_after``) sends everything from sequence number 0 again."""
    frames = [f + "\n\n" for f in RECORDED.read_text().split("\n\n") if f.startswith("event:")]
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = "".join(frames[:8] if request.method == "POST" else frames)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body.encode())

    events: list[Event] = []
    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    from geppetto.providers.openai_responses import ResponsesEngine

    eng = ResponsesEngine("gpt-4o", api_key="sk-test", http=client, background=True)
    with with_sinks(events.append):
        turn = await eng.run_inference(_turn("What is 2 + 2?"))
    await client.aclose()
    assert _texts(turn) == ["2 + 2 equals 4."]
    assert "".join(e.delta for e in events if e.type == "text_delta") == "2 + 2 equals 4."  # type: ignore[attr-defined]
    assert [(r.method, dict(r.url.params)) for r in seen] == [
        ("POST", {}),
        ("GET", {"stream": "true", "starting_after": "7"}),
    ]
    rid = json.loads(frames[0].split("data: ", 1)[1])["response"]["id"]
    assert get_state(turn).previous_response_id == rid


def test_the_cursor_skips_what_it_has_seen() -> None:
    from geppetto.providers._sse import SSEEvent

    cursor = Cursor()
    first = SSEEvent(
        "response.created",
        json.dumps({"type": "response.created", "sequence_number": 0, "response": {"id": "r", "status": "queued"}}),
    )
    delta = SSEEvent(
        "response.output_text.delta", json.dumps({"type": "response.output_text.delta", "sequence_number": 1})
    )
    assert cursor.take(first) and cursor.take(delta)
    assert not cursor.take(first) and not cursor.take(delta)
    assert (cursor.response_id, cursor.last, cursor.status, cursor.repeats, cursor.ended) == (
        "r",
        1,
        "queued",
        2,
        False,
    )


async def test_past_the_resume_window_the_response_is_polled(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.background_resume_window = 0
    sim.queue(Reply(text=LONG))
    sim.fail_next(drop_after=7)  # after two deltas
    events: list[Event] = []
    with with_sinks(events.append):
        turn = await engine(sim, background=True, poll_interval=0.01).run_inference(_turn())
    assert _texts(turn) == [LONG]
    deltas = [e.delta for e in events if e.type == "text_delta"]  # type: ignore[attr-defined]
    assert deltas[:2] == ["word0 ", "word1 "] and "".join(deltas) == LONG, "what the stream missed, as one delta"
    rid = turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)]
    gets = _gets(sim)
    assert gets[0] == {"stream": "true", "starting_after": "6"}, "a resume first, refused past the window"
    assert gets[1:] and all(q == {} for q in gets[1:]), "then polling until the run ended"
    assert get_state(turn).previous_response_id == rid


async def test_cancelling_the_caller_cancels_the_response_and_records_its_usage(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.background_pace = 0.02
    sim.queue(Reply(reasoning="Thinking it over first.", text=LONG))
    events: list[Event] = []
    eng = engine(sim, background=True)
    turn = _turn()

    async def run() -> None:
        with with_sinks(events.append):
            await eng.run_inference(turn)

    task = asyncio.get_running_loop().create_task(run())
    for _ in range(500):  # until the message has begun: the reasoning item is done by then
        await asyncio.sleep(0.01)
        if any(e.type == "text_delta" for e in events):
            break
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cancels = [r.path for r in sim.requests if r.method == "POST" and r.path.endswith("/cancel")]
    assert len(cancels) == 1, "the response was cancelled on the server"
    rid = cancels[0].split("/")[-2]
    async with httpx.AsyncClient(headers={"authorization": "Bearer x"}) as client:
        retrieved = (await client.get(f"{sim.openai_url}/responses/{rid}")).json()
    assert retrieved["status"] == "cancelled"
    assert [i["type"] for i in retrieved["output"]] == ["reasoning"], "what it had produced, no more"
    logged = [e for e in events if e.type == "log"]
    assert len(logged) == 1 and logged[0].fields["response_id"] == rid  # type: ignore[attr-defined]
    usage = logged[0].metadata.usage
    assert usage is not None and usage.output_tokens == retrieved["usage"]["output_tokens"] > 0
    assert [b.kind for b in turn.blocks] == [BlockKind.USER], "nothing of a cancelled response is kept"
    assert get_state(turn) is None
    # the Turn goes on without an anchor: the next request sends it whole
    await eng.run_inference(turn)
    assert "previous_response_id" not in sim.requests[-1].body


def _answer_with_status(status: str) -> Any:
    def answer(request: httpx.Request) -> httpx.Response:
        response = {"id": "resp_x", "object": "response", "status": status, "output": [], "background": True}
        item = {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "partial", "annotations": []}],
        }
        frames = [
            {"type": "response.created", "sequence_number": 0, "response": {**response, "status": "queued"}},
            {"type": "response.output_item.done", "sequence_number": 1, "output_index": 0, "item": item},
            {"type": "response.completed", "sequence_number": 2, "response": {**response, "output": [item]}},
        ]
        body = "".join(f"event: {f['type']}\ndata: {json.dumps(f)}\n\n" for f in frames)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body.encode())

    return answer


async def test_a_response_that_did_not_finish_is_never_an_anchor() -> None:
    from geppetto.providers.openai_responses import ResponsesEngine

    client = httpx.AsyncClient(transport=httpx.MockTransport(_answer_with_status("in_progress")))
    eng = ResponsesEngine("gpt-4o", api_key="sk-test", http=client, background=True)
    turn = await eng.run_inference(_turn())
    await client.aclose()
    assert _texts(turn) == ["partial"]
    assert get_state(turn) is None and BLOCK_META_RESPONSE_ID.get(turn.blocks[-1].metadata) is None
    for status in ("queued", "in_progress", "cancelled", "failed"):
        assert not_an_anchor({"status": status}, None, None) == f"its status is {status!r}, not completed"
    for status in ("completed", "incomplete"):
        assert not_an_anchor({"status": status}, None, None) is None
    assert "the Turn planned 'resp_a'" in str(not_an_anchor({"status": "completed"}, "resp_a", None))


async def test_a_stream_broken_before_the_response_id_raises_naming_why(geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(drop_after=0)
    with pytest.raises(StreamError, match="no response id had arrived, so the background response cannot be resumed"):
        await engine(geppetto_sim, background=True).run_inference(_turn())


def test_background_settings_are_checked() -> None:
    from geppetto.providers.openai_responses import ResponsesEngine

    with pytest.raises(ConfigurationError, match="pass store=True or leave background off"):
        ResponsesEngine("m", api_key="k", background=True, store=False)
    with pytest.raises(ConfigurationError, match="poll_interval must be a positive number"):
        ResponsesEngine("m", api_key="k", background=True, poll_interval=0)
    with pytest.raises(ConfigurationError, match="max_resumes must be 0 or more"):
        ResponsesEngine("m", api_key="k", background=True, max_resumes=-1)


async def test_a_pending_response_is_picked_up_after_its_cursor(geppetto_sim: Simulator) -> None:
    """What a server worker does for an inference whose worker died: read the same response on."""
    sim = geppetto_sim
    sim.queue(Reply(text=LONG))
    sim.fail_next(drop_after=6)  # the first reader goes away after sequence number 5 (the first delta)
    body = {"model": "sim-1", "input": "Tell me a long story", "background": True, "store": True, "stream": True}
    async with httpx.AsyncClient(headers={"authorization": "Bearer x"}) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            async with client.stream("POST", f"{sim.openai_url}/responses", json=body) as response:
                async for _ in response.aiter_lines():
                    pass
    rid = next(iter(sim.state.background_runs))
    turn = _turn()
    events: list[Event] = []
    token = PENDING_RESPONSE.set(PendingResponse(rid, 5, len(turn.blocks)))
    try:
        with with_sinks(events.append):
            turn = await engine(sim, background=True).run_inference(turn)
    finally:
        PENDING_RESPONSE.reset(token)
    assert _texts(turn) == [LONG]
    assert "".join(e.delta for e in events if e.type == "text_delta") == LONG.removeprefix("word0 ")  # type: ignore[attr-defined]
    assert [(r.method, r.query) for r in sim.requests[1:]] == [("GET", {"stream": "true", "starting_after": "5"})]
    assert get_state(turn).previous_response_id == rid
    assert turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)] == rid


async def test_a_pending_response_of_another_turn_is_not_picked_up(
    geppetto_sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    geppetto_sim.queue(Reply(text="Fresh."))
    token = PENDING_RESPONSE.set(PendingResponse("resp_elsewhere", 5, 7))
    try:
        turn = await engine(geppetto_sim, background=True).run_inference(_turn())
    finally:
        PENDING_RESPONSE.reset(token)
    assert _texts(turn) == ["Fresh."]
    assert [r.method for r in geppetto_sim.requests] == ["POST"]
    assert "created for a Turn of 7 blocks, this one has 1" in caplog.text


def _frames(count: int, *, rid: str = "resp_m") -> str:
    """The first ``count`` events of a background response that then stops (no terminal event)."""
    queued = {"id": rid, "object": "response", "status": "queued", "output": [], "background": True}
    frames = [
        {"type": "response.created", "sequence_number": 0, "response": queued},
        {"type": "response.queued", "sequence_number": 1, "response": queued},
        {"type": "response.in_progress", "sequence_number": 2, "response": {**queued, "status": "in_progress"}},
    ]
    return "".join(f"event: {f['type']}\ndata: {json.dumps(f)}\n\n" for f in frames[:count])


def _mock(answer: Any) -> tuple[Any, list[httpx.Request]]:
    from geppetto.providers.openai_responses import ResponsesEngine

    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(request)  # type: ignore[no-any-return]

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return ResponsesEngine(
        "gpt-4o", api_key="sk-test", http=client, background=True, poll_interval=0.01, max_resumes=1
    ), seen


SSE = {"content-type": "text/event-stream"}


def _polled(status: str, **extra: Any) -> dict[str, Any]:
    item = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Polled answer.", "annotations": []}],
    }
    return {"id": "resp_m", "object": "response", "status": status, "output": [item], "background": True, **extra}


async def test_resumes_that_bring_nothing_new_end_in_polling() -> None:
    polls = iter([_polled("in_progress"), _polled("in_progress"), _polled("completed")])

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(200, headers=SSE, content=_frames(3).encode())
        if request.url.params.get("stream") == "true":  # the stream has nothing after the cursor yet
            return httpx.Response(200, headers=SSE, content=_frames(3).encode())
        return httpx.Response(200, json=next(polls))

    eng, seen = _mock(answer)
    turn = await eng.run_inference(_turn())
    assert _texts(turn) == ["Polled answer."]
    assert [(r.method, dict(r.url.params)) for r in seen] == [
        ("POST", {}),
        ("GET", {"stream": "true", "starting_after": "2"}),
        ("GET", {}),  # nothing new: has it ended? not yet
        ("GET", {"stream": "true", "starting_after": "2"}),
        ("GET", {}),  # still not
        ("GET", {}),  # more than max_resumes=1 resumes brought nothing: polled until it ended
    ]
    assert get_state(turn).previous_response_id == "resp_m"


@pytest.mark.parametrize(
    ("status", "error", "message"),
    [
        ("cancelled", ProviderError, "was cancelled before it finished"),
        ("failed", StreamError, "the response failed: overloaded"),
    ],
)
async def test_a_polled_response_that_did_not_complete_raises(
    status: str, error: type[Exception], message: str
) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(200, headers=SSE, content=_frames(2).encode())
        if request.url.params.get("stream") == "true":  # past the resume window
            err = {"message": "The stream is gone.", "type": "invalid_request_error", "param": None, "code": None}
            return httpx.Response(400, json={"error": err})
        return httpx.Response(200, json=_polled(status, error={"code": "server_error", "message": "overloaded"}))

    eng, _ = _mock(answer)
    turn = _turn()
    with pytest.raises(error, match=message):
        await eng.run_inference(turn)
    assert get_state(turn) is None


async def test_a_refused_background_request_is_not_resumed() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        err = {"message": "Invalid 'model'.", "type": "invalid_request_error", "param": "model", "code": None}
        return httpx.Response(400, json={"error": err})

    eng, seen = _mock(answer)
    with pytest.raises(ProviderError, match="Invalid 'model'"):
        await eng.run_inference(_turn())
    assert [r.method for r in seen] == ["POST"]
