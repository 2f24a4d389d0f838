"""How the engine reports the errors of third-party Responses servers (simulator quirks): an error event
without a type, errors in FastAPI's ``{"detail": ...}`` shape, a server without the Conversations API; and
streams without output_item events, without usage, or ending in ``[DONE]``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from responses_support import engine, forget, normalize

import geppetto as gp
from geppetto.events import EventMetadata
from geppetto.providers._http_errors import openai_error_info, responses_create_error_info
from geppetto.providers._sse import SSEEvent
from geppetto.providers.openai_responses import ResponsesMetrics
from geppetto.providers.openai_responses._answer import StreamState, consume_stream
from geppetto.providers.openai_responses._items import blocks_to_items
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import BLOCK_META_RESPONSE_ID, Block, Turn


def _start() -> Turn:
    turn = Turn()
    turn.append(Block.user("My name is Ada."))
    return turn


def _last_response_id(turn: Turn) -> str:
    return str(turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)])


async def _events(*events: SSEEvent) -> AsyncIterator[SSEEvent]:
    for event in events:
        yield event


async def _consume(*events: SSEEvent) -> StreamState:
    return await consume_stream(_events(*events), StreamState(), EventMetadata())


# An error event without a type -------------------------------------------------------------------------------


@pytest.mark.geppetto_sim_quirks("untyped-stream-errors")
async def test_an_untyped_not_found_in_the_stream_is_recovered_like_the_http_400(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    metrics = ResponsesMetrics()
    eng = engine(sim, metrics=metrics)
    turn = await eng.run_inference(_start())
    forget(sim, _last_response_id(turn))
    turn.append(Block.user("What is my name?"))
    turn = await eng.run_inference(turn)
    assert metrics.snapshot()["counters"]["fallback:previous_response_not_found"] == 1
    # The resend carried the whole Turn, and the model read exactly it.
    assert normalize(sim.context_items(_last_response_id(turn))) == normalize(blocks_to_items(turn.blocks[:-1]))


@pytest.mark.geppetto_sim_quirks("untyped-stream-errors")
async def test_an_untyped_not_found_names_the_servers_message(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    eng = engine(sim, on_previous_not_found="raise")
    turn = await eng.run_inference(_start())
    gone = _last_response_id(turn)
    forget(sim, gone)
    turn.append(Block.user("What is my name?"))
    with pytest.raises(gp.PreviousResponseNotFoundError) as caught:
        await eng.run_inference(turn)
    assert caught.value.message == f"stream error: Previous response with id '{gone}' not found."
    assert caught.value.code == "previous_response_not_found"


@pytest.mark.geppetto_sim_quirks("untyped-stream-errors")
async def test_an_untyped_error_mid_stream_surfaces_the_servers_message(geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(error_after=2)
    with pytest.raises(gp.StreamError) as caught:
        await engine(geppetto_sim).run_inference(_start())
    message = str(caught.value)
    assert "stream error: The server had an error while processing your request. Sorry about that!" in message
    assert "ended without response.completed" not in message


async def test_an_error_event_line_with_an_untyped_payload() -> None:
    data = json.dumps({"error": {"message": "Response with id 'resp_1' not found", "code": None}})
    with pytest.raises(gp.PreviousResponseNotFoundError, match="stream error: Response with id 'resp_1' not found"):
        await _consume(SSEEvent("error", data))
    data = json.dumps({"error": {"message": "upstream timed out", "type": "server_error", "code": "timeout"}})
    with pytest.raises(gp.StreamError, match="stream error: upstream timed out") as caught:
        await _consume(SSEEvent("error", data))
    assert caught.value.code == "timeout"


async def test_a_not_found_after_the_response_began_is_a_broken_stream_not_a_lost_parent() -> None:
    created = json.dumps({"type": "response.created", "response": {"id": "resp_2", "status": "in_progress"}})
    error = json.dumps({"error": {"message": "Response with id 'resp_2' not found"}})
    with pytest.raises(gp.StreamError) as caught:
        await _consume(SSEEvent("", created), SSEEvent("", error))
    assert not isinstance(caught.value, gp.PreviousResponseNotFoundError)
    assert "stream error: Response with id 'resp_2' not found" in str(caught.value)


async def test_a_done_marker_without_a_terminal_event_is_the_end_of_the_stream() -> None:
    created = json.dumps({"type": "response.created", "response": {"id": "resp_3", "status": "in_progress"}})
    with pytest.raises(gp.StreamError, match=r"the stream ended without response\.completed"):
        await _consume(SSEEvent("", created), SSEEvent("", "[DONE]"))


# Errors in FastAPI's shape -----------------------------------------------------------------------------------


def test_detail_bodies_give_their_message() -> None:
    assert openai_error_info({"detail": "Not Found"}).message == "Not Found"  # type: ignore[union-attr]
    info = openai_error_info({"detail": [{"loc": ["body", "input", 0], "msg": "field required", "type": "missing"}]})
    assert info is not None and (info.message, info.param, info.error_type) == (
        "input.0: field required",
        "input.0",
        "missing",
    )
    assert openai_error_info({"detail": 3}) is None
    created = responses_create_error_info({"detail": "Response with id 'resp_1' not found."})
    assert created is not None and created.code == "previous_response_not_found"
    # An OpenAI code is kept as it is; other not-found messages are not a lost parent.
    assert responses_create_error_info({"detail": "Conversation with id 'c' not found."}).code is None  # type: ignore[union-attr]


@pytest.mark.geppetto_sim_quirks("detail-errors")
async def test_a_detail_error_surfaces_its_message(geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(400)
    with pytest.raises(gp.BadRequestError) as caught:
        await engine(geppetto_sim).run_inference(_start())
    assert str(caught.value) == "[openai 400] Simulated HTTP 400."


@pytest.mark.geppetto_sim_quirks("detail-errors")
@pytest.mark.parametrize("stream", [True, False])
async def test_a_detail_not_found_parent_is_recovered(geppetto_sim: Simulator, stream: bool) -> None:
    sim = geppetto_sim
    metrics = ResponsesMetrics()
    eng = engine(sim, metrics=metrics, stream=stream)
    turn = await eng.run_inference(_start())
    forget(sim, _last_response_id(turn))
    turn.append(Block.user("What is my name?"))
    turn = await eng.run_inference(turn)
    assert metrics.snapshot()["counters"]["fallback:previous_response_not_found"] == 1
    assert normalize(sim.context_items(_last_response_id(turn))) == normalize(blocks_to_items(turn.blocks[:-1]))
    assert {bool(r.body.get("stream")) for r in sim.requests if r.path == "/v1/responses"} == {stream}


# A server without the Conversations API ----------------------------------------------------------------------


@pytest.mark.parametrize("quirks", [["no-conversations"], ["no-conversations", "detail-errors"]])
async def test_conversation_mode_without_conversations_names_the_endpoint_and_the_fix(
    geppetto_sim: Simulator, quirks: list[str]
) -> None:
    geppetto_sim.quirks = quirks
    with pytest.raises(gp.NotFoundError) as caught:
        await engine(geppetto_sim, mode="conversation").run_inference(_start())
    message = caught.value.message
    assert message.startswith("the server has no Conversations API: POST /conversations answered 404 (")
    assert 'use ResponsesEngine(mode="chained")' in message
    assert caught.value.status == 404
    assert [r.path for r in geppetto_sim.requests] == ["/v1/conversations"]  # nothing else was tried


@pytest.mark.geppetto_sim_quirks("no-conversations")
async def test_chained_mode_works_without_conversations(geppetto_sim: Simulator) -> None:
    eng = engine(geppetto_sim, mode="chained")
    turn = await eng.run_inference(_start())
    turn.append(Block.user("What is my name?"))
    turn = await eng.run_inference(turn)
    assert geppetto_sim.requests[-1].body["previous_response_id"]


# Streams of other shapes -------------------------------------------------------------------------------------


@pytest.mark.parametrize("quirks", [["no-item-events"], ["done-marker"], ["no-item-events", "done-marker", "no-usage"]])
async def test_a_tool_loop_over_streams_of_other_shapes(geppetto_sim: Simulator, quirks: list[str]) -> None:
    sim = geppetto_sim
    sim.quirks = quirks
    sim.queue(
        Reply(text="Let me look.", tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, call_id="call_9")]),
        Reply(text="Sunny in Oslo."),
    )
    eng = engine(sim)
    turn = await eng.run_inference(_start())
    calls = [b for b in turn.blocks if b.kind is gp.BlockKind.TOOL_CALL]
    assert [(c.payload["name"], c.payload["args"]) for c in calls] == [("get_weather", {"city": "Oslo"})]
    assert turn.blocks[-2].text == "Let me look."
    turn.append(Block.tool_use("call_9", "sunny"))
    turn = await eng.run_inference(turn)
    assert turn.blocks[-1].text == "Sunny in Oslo."
    bodies = [r.body for r in sim.requests if r.path == "/v1/responses"]
    assert len(bodies) == 2 and bodies[1]["previous_response_id"]
    assert normalize(sim.context_items(_last_response_id(turn))) == normalize(blocks_to_items(turn.blocks[:-1]))
