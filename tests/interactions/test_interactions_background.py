"""Background interactions: a broken stream is resumed by event id (``GET /interactions/{id}?stream=true
&last_event_id=...``) into one interaction whose deltas are published once, and cancelling the caller
cancels the interaction, which then never anchors a later request."""

from __future__ import annotations

import asyncio

import pytest
from interactions_support import PATH, assert_server_holds_the_turn, creates, engine, last_interaction

from geppetto._exceptions import StreamError
from geppetto.events import Event, EventLog, EventTextDelta, with_sinks
from geppetto.providers.gemini import get_interactions_state
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import BLOCK_META_PREFIX_FINGERPRINT, Block, BlockKind, Turn

LONG = "The quick brown fox jumps over the lazy dog, then naps in the warm afternoon sun by the river."


def _turn() -> Turn:
    return Turn(blocks=[Block.user("Tell me a story.")])


def _texts(turn: Turn) -> list[str]:
    return [b.text for b in turn.blocks if b.kind is BlockKind.LLM_TEXT]


async def test_a_broken_background_stream_is_resumed_by_event_id(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text=LONG), Reply(text="Next."))
    sim.fail_next(drop_after=4, times=2)  # the create stream and the first resume break
    events: list[Event] = []
    eng = engine(sim, background=True)
    with with_sinks(events.append):
        turn = await eng.run_inference(_turn())
    assert _texts(turn) == [LONG]
    assert "".join(e.delta for e in events if isinstance(e, EventTextDelta)) == LONG, "every delta published once"
    posted = creates(sim)[0]
    assert (posted["background"], posted["stream"]) == (True, True) and posted.get("store") is not False
    iid = last_interaction(turn)
    gets = [r for r in sim.requests if r.method == "GET"]
    assert [r.path for r in gets] == [f"{PATH}/{iid}"] * 2
    assert all(r.query.get("stream") == "true" and r.query.get("last_event_id") for r in gets)
    assert gets[0].query["last_event_id"] != gets[1].query["last_event_id"]
    state = get_interactions_state(turn)
    assert state is not None and state.previous_interaction_id == iid, "the completed interaction is the anchor"
    turn.append(Block.user("And then?"))
    turn = await eng.run_inference(turn)
    assert creates(sim)[-1]["previous_interaction_id"] == iid
    assert_server_holds_the_turn(sim, turn)


async def test_a_stream_cut_before_the_interaction_id_cannot_be_resumed(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text=LONG))
    sim.fail_next(drop_after=0, times=1)  # the create stream ends before the interaction's id arrives
    with pytest.raises(StreamError):
        await engine(sim, background=True).run_inference(_turn())


async def test_after_resumes_that_bring_nothing_new_the_interaction_is_polled(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(tool_calls=[ToolCall("get_weather", {"city": "Oslo"}, call_id="c1")]), Reply(text=LONG))
    eng = engine(sim, background=True, max_resumes=2, poll_interval=0.01)
    turn = await eng.run_inference(_turn())
    turn.append(Block.tool_use("c1", "sunny"))
    sim.fail_next(drop_after=3)  # the create stream breaks after the id arrived
    sim.fail_next(drop_after=0, times=2)  # and both resumes break before anything new
    turn = await eng.run_inference(turn)
    assert [b.kind for b in turn.blocks] == [
        BlockKind.USER,
        BlockKind.TOOL_CALL,
        BlockKind.TOOL_USE,
        BlockKind.LLM_TEXT,
    ]
    assert _texts(turn) == [LONG], "the input steps GET shows are not taken for output"
    gets = [r.query for r in sim.requests if r.method == "GET"]
    assert [q.get("stream") for q in gets][:2] == ["true", "true"] and gets[-1].get("stream") is None
    state = get_interactions_state(turn)
    assert state is not None and state.previous_interaction_id == last_interaction(turn)
    assert_server_holds_the_turn(sim, turn)


async def test_a_whole_answer_without_streaming(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="One answer."))
    turn = await engine(geppetto_sim, stream=False).run_inference(_turn())
    assert _texts(turn) == ["One answer."] and creates(geppetto_sim)[0]["stream"] is False
    assert_server_holds_the_turn(geppetto_sim, turn)


async def test_cancelling_the_caller_cancels_the_interaction(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text=LONG))
    sim.fail_next(stall_after=4, stall_seconds=30)  # created, step.start, two deltas, then nothing
    first_delta = asyncio.Event()
    eng = engine(sim, background=True)

    logs: list[EventLog] = []

    def sink(event: Event) -> None:
        if isinstance(event, EventTextDelta):
            first_delta.set()
        if isinstance(event, EventLog):
            logs.append(event)

    turn = _turn()

    async def run() -> None:
        with with_sinks(sink):
            await eng.run_inference(turn)

    task = asyncio.create_task(run())
    await asyncio.wait_for(first_delta.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cancels = [r.path for r in sim.requests if r.path.endswith("/cancel")]
    assert len(cancels) == 1 and cancels[0].startswith(f"{PATH}/")
    [cancelled] = [e for e in logs if e.message == "background interaction cancelled"]
    assert cancelled.fields["status"] == "cancelled" and cancelled.fields["response_id"] == cancels[0].split("/")[-2]
    usage = cancelled.metadata.usage
    assert usage is not None and usage.input_tokens > 0, "the usage of the cancelled interaction is published"
    assert usage.output_tokens < len(LONG.split()), "what it had produced, not the whole answer"
    # nothing of the cancelled interaction anchors: the next request sends the whole Turn
    assert not any(BLOCK_META_PREFIX_FINGERPRINT.get(b.metadata) for b in turn.blocks)
