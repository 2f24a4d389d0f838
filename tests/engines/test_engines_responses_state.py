"""The Responses engine's newer server-state requests (issue 31) against the official SDK's request types:
in-request compaction, ``/responses/compact`` by reference, ``/responses/input_tokens``, prompt caching,
and replayed phases, citations and reasoning text."""

from __future__ import annotations

from conformance_support import check_responses, check_sent

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine, blocks_to_items
from geppetto.providers.openai_responses._answer import item_to_block
from geppetto.providers.openai_responses._items import server_compaction
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import BLOCK_META_RESPONSE_ID, TURN_META_SESSION_ID, Block, Turn


@gp.tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city} " * 10


async def test_compaction_counts_and_cache_keys_fit_the_sdk_types(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    steps = 40
    sim.queue(*[Reply(tool_calls=[ToolCall("get_weather", {"city": f"city{i}"})]) for i in range(steps - 1)])
    sim.queue(Reply(text="done"))
    engine = ResponsesEngine(
        "gpt-5.5",
        api_key="k",
        base_url=sim.openai_url,
        compact_threshold=1000,
        prompt_cache_retention="24h",
        tools=[get_weather],
    )
    session = gp.Session(engine, tools=[get_weather], tool_loop_options={"max_iterations": steps + 1})
    out = await session.run("Check the weather in forty cities.")
    await engine.count_tokens(out)
    rid = str(out.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)])
    await engine.compact(list(out.blocks), out)
    paths = {r.path for r in sim.requests}
    assert {"/v1/responses", "/v1/responses/compact", "/v1/responses/input_tokens"} <= paths
    assert any(r.body.get("previous_response_id") == rid for r in sim.requests if r.path == "/v1/responses/compact")
    assert any(server_compaction(b) for b in out.blocks)  # the server compacted inside the loop
    for request in sim.requests:
        check_sent(request.path, request.body)


def test_replayed_phases_citations_and_reasoning_text_fit_the_sdk_types() -> None:
    reasoning = item_to_block(
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [],
            "encrypted_content": "gAAAA-sealed",
            "content": [{"type": "reasoning_text", "text": "think"}],
        }
    )
    commentary = item_to_block(
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "phase": "commentary",
            "content": [
                {
                    "type": "output_text",
                    "text": "1889 [t]",
                    "annotations": [
                        {"type": "url_citation", "start_index": 5, "end_index": 8, "title": "t", "url": "https://t"}
                    ],
                }
            ],
        }
    )
    final = item_to_block(
        {"type": "message", "id": "msg_2", "role": "assistant", "phase": "final_answer", "content": "ok"}
    )
    assert reasoning is not None and commentary is not None and final is not None
    turn = Turn(blocks=[Block.user("q"), reasoning, commentary, final, Block.user("more")])
    TURN_META_SESSION_ID.set(turn.metadata, "s")
    items = blocks_to_items(turn.blocks)
    assert items[2]["phase"] == "commentary" and items[2]["content"][0]["annotations"]
    assert items[3] == {"role": "assistant", "content": "ok", "phase": "final_answer"}
    check_responses({"model": "gpt-5.5", "input": items, "stream": True, "prompt_cache_key": "geppetto-x"})
