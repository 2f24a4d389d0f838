"""A pause for approval never breaks the chain: the resumed request sends only the tool results after
the response that made the calls (its ``previous_response_id``), in the same process and after a restore
with a new engine; no request falls back to the whole Turn."""

from __future__ import annotations

from responses_support import assert_valid_requests

import geppetto as gp
from geppetto.providers._stateful import ResponsesMetrics
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.session import MemoryTurnStore
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import BLOCK_META_RESPONSE_ID, BlockKind


@gp.tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


def _engine(sim: Simulator, metrics: ResponsesMetrics) -> ResponsesEngine:
    return ResponsesEngine("sim-1", api_key="sk-test", base_url=sim.openai_url, mode="chained", metrics=metrics)


def _posts(sim: Simulator) -> list[dict[str, object]]:
    return [r.body for r in sim.requests if r.path == "/v1/responses"]


async def test_a_resumed_request_chains_from_the_response_that_made_the_calls(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(
        Reply(text="Hi."),
        Reply(tool_calls=[ToolCall("delete_file", {"path": "a"}), ToolCall("read_file", {"path": "b"})]),
        Reply(text="Deleted a."),
    )
    metrics = ResponsesMetrics()
    session = gp.Session(_engine(sim, metrics), tools=[delete_file, read_file])
    await session.run("hello")
    paused = await session.run("delete a, read b")
    assert [p.name for p in session.pending_approvals] == ["delete_file"]
    call = next(b for b in paused.blocks if b.kind is BlockKind.TOOL_CALL)
    anchor = BLOCK_META_RESPONSE_ID.get(call.metadata)
    final = await session.resume({session.pending_approvals[0].call_id: True})
    assert final.blocks[-1].text == "Deleted a."
    bodies = _posts(sim)
    assert len(bodies) == 3 and bodies[2]["previous_response_id"] == anchor
    sent = bodies[2]["input"]
    assert isinstance(sent, list) and [i["type"] for i in sent] == ["function_call_output", "function_call_output"]
    assert metrics.counters["fallback"] == 0
    assert_valid_requests(sim)


async def test_a_resume_after_restore_with_a_new_engine_chains_too(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(tool_calls=[ToolCall("delete_file", {"path": "a"})]), Reply(text="Not deleted."))
    store = MemoryTurnStore()
    metrics = ResponsesMetrics()
    first = gp.Session(_engine(sim, metrics), tools=[delete_file], store=store)
    paused = await first.run("delete a")
    anchor = BLOCK_META_RESPONSE_ID.get(paused.blocks[-1].metadata)

    later = await gp.Session.restore(_engine(sim, metrics), store, first.session_id, tools=[delete_file])
    [waiting] = later.pending_approvals
    final = await later.resume({waiting.call_id: "it is still in use"})
    assert final.blocks[-1].text == "Not deleted."
    body = _posts(sim)[-1]
    assert body["previous_response_id"] == anchor
    assert body["input"] == [
        {
            "type": "function_call_output",
            "call_id": waiting.call_id,
            "output": '{"error": "the user denied this tool call: it is still in use", "result": ""}',
        }
    ]
    assert metrics.counters["fallback"] == 0


async def test_a_partial_decision_then_the_rest_still_chains(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    calls = [ToolCall("delete_file", {"path": "a"}), ToolCall("delete_file", {"path": "b"})]
    sim.queue(Reply(tool_calls=calls), Reply(text="One deleted."))
    metrics = ResponsesMetrics()
    session = gp.Session(_engine(sim, metrics), tools=[delete_file])
    paused = await session.run("delete a and b")
    anchor = BLOCK_META_RESPONSE_ID.get(paused.blocks[-1].metadata)
    first, second = (p.call_id for p in session.pending_approvals)
    await session.resume({first: True})  # runs a, the model waits for b
    assert len(_posts(sim)) == 1 and [p.call_id for p in session.pending_approvals] == [second]
    final = await session.resume({second: False})
    assert final.blocks[-1].text == "One deleted."
    body = _posts(sim)[-1]
    assert body["previous_response_id"] == anchor and len(body["input"]) == 2  # type: ignore[arg-type]
    assert metrics.counters["fallback"] == 0
