"""Message ``phase``, output-text annotations and ``reasoning_text`` content (issue 31): kept on blocks
from recorded gpt-5.x traffic and replayed unchanged in stateless and fallback requests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from geppetto.providers._http import HttpTransport
from geppetto.providers._retry import RetryPolicy
from geppetto.providers.openai_responses import ResponsesEngine, blocks_to_items
from geppetto.providers.openai_responses._answer import item_to_block
from geppetto.providers.openai_responses._items import PAYLOAD_CONTENT, PAYLOAD_STANDALONE
from geppetto.simulator import Reply, Simulator, ToolCall
from geppetto.turns import BLOCK_META_RESPONSE_ID, PAYLOAD_PHASE, Block, BlockKind, Turn

WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}

CASSETTES = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "cassettes"  # a copy kept with the tests
PHASES = CASSETTES / "test_openai_responses" / "test_openai_responses_phase_live.yaml"
CITATIONS = (
    CASSETTES / "test_openai_responses" / "test_openai_responses_model_web_search_tool_without_external_access.yaml"
)


def _interactions(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        pytest.skip(f"recorded traffic not found at {path}")
    return list(yaml.safe_load(path.read_text())["interactions"])


def _sse(*events: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _replaying(responses: list[dict[str, Any]], extra: dict[str, Any]) -> tuple[ResponsesEngine, list[Any]]:
    """An engine whose server streams the recorded ``responses`` in order (then ``extra`` for every later
    request), each as created + completed; the request bodies land in the list."""
    bodies: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        final = copy.deepcopy(responses[len(bodies) - 1] if len(bodies) <= len(responses) else extra)
        final["id"] = f"{final['id']}_{len(bodies)}"
        final["previous_response_id"] = bodies[-1].get("previous_response_id")
        created = {**final, "status": "in_progress", "output": []}
        body = _sse(
            {"type": "response.created", "response": created}, {"type": "response.completed", "response": final}
        )
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    http = HttpTransport(
        "http://test/v1", provider="openai", transport=httpx.MockTransport(handler), retry=RetryPolicy(max_retries=0)
    )
    return ResponsesEngine("gpt-5.5", api_key="k", http=http, instructions_mode=True, mode="stateless"), bodies


def _without_logprobs(item: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(item)
    for part in out.get("content") if isinstance(out.get("content"), list) else []:
        part.pop("logprobs", None)
    return out


async def test_phases_replay_as_the_recorded_client_sent_them() -> None:
    recorded = _interactions(PHASES)
    responses = [i["response"]["parsed_body"] for i in recorded]
    eng, bodies = _replaying(responses, responses[-1])
    turn = Turn(blocks=[Block.system("Briefly narrate."), Block.user("What is the capital of PotatoLand?")])
    await eng.run_inference(turn)
    reasoning, commentary, call = turn.blocks[2:]
    assert reasoning.kind is BlockKind.REASONING and reasoning.payload["encrypted_content"]
    assert commentary.payload[PAYLOAD_PHASE] == "commentary" and PAYLOAD_CONTENT not in commentary.payload
    turn.append(Block.tool_use(call.payload["id"], "Potato City"))
    await eng.run_inference(turn)
    final = turn.blocks[-1]
    assert final.payload[PAYLOAD_PHASE] == "final_answer" and final.text.startswith("The capital")
    # the second request replays the commentary message exactly as the recorded client did (the spec
    # requires logprobs on an output_text part; the recorded client left them out)
    sent, theirs = bodies[1]["input"], recorded[1]["request"]["parsed_body"]["input"]
    assert _without_logprobs(sent[2]) == _without_logprobs(theirs[2])
    assert sent[1] == theirs[1]  # the reasoning item it pairs with
    # a later stateless request replays the final answer, which follows no reasoning, with its phase
    turn.append(Block.user("Thanks"))
    await eng.run_inference(turn)
    assert bodies[2]["input"][5] == {
        "role": "assistant",
        "content": "The capital of PotatoLand is **Potato City**.",
        "phase": "final_answer",
    }


async def test_citations_survive_and_replay_in_stateless_and_fallback_requests() -> None:
    recorded = _interactions(CITATIONS)
    response = recorded[0]["response"]["parsed_body"]
    message = response["output"][1]
    eng, bodies = _replaying([response], response)
    eng.mode = "chained"
    turn = Turn(blocks=[Block.user("Search the web for the year the Eiffel Tower opened to the public.")])
    await eng.run_inference(turn)
    block = turn.blocks[-1]
    assert block.payload[PAYLOAD_CONTENT] == [{k: v for k, v in message["content"][0].items() if k != "logprobs"}]
    assert block.payload[PAYLOAD_STANDALONE] is True and block.payload[PAYLOAD_PHASE] == "final_answer"
    # a whole-Turn request (the Turn's first block edited: the chain no longer holds it) replays the
    # message in its output form, annotations and all
    turn.append(Block.user("And its height?"))
    turn.blocks[0] = Block.user("Search the web for the year the Eiffel Tower opened.")
    await eng.run_inference(turn)
    assert "previous_response_id" not in bodies[1]
    replayed = bodies[1]["input"][2]
    assert replayed == {**message, "content": [{**message["content"][0], "logprobs": []}]}
    assert [i.get("type") for i in bodies[1]["input"]] == [None, "web_search_call", "message", None]


def test_a_message_whose_text_changed_replays_its_text_alone() -> None:
    item = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "phase": "final_answer",
        "content": [{"type": "output_text", "text": "1889 [a]", "annotations": [{"type": "url_citation", "url": "u"}]}],
    }
    block = item_to_block(item)
    assert block is not None
    block.payload["standalone"] = True
    block.payload["text"] = "1889"
    (sent,) = blocks_to_items([block])
    assert sent == {"role": "assistant", "content": "1889", "phase": "final_answer"}


def test_reasoning_text_content_replays_with_its_reasoning() -> None:
    item = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
        "encrypted_content": "gAAAA-sealed",
        "content": [{"type": "reasoning_text", "text": "think "}, {"type": "reasoning_text", "text": "hard"}],
    }
    reasoning = item_to_block(item)
    answer = item_to_block(
        {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
    )
    assert reasoning is not None and answer is not None
    assert reasoning.text == "think hard" and reasoning.kind is BlockKind.REASONING
    sent = blocks_to_items([Block.user("q"), reasoning, answer])
    assert sent[1] == {**item, "content": item["content"]}
    reasoning.payload["text"] = "edited"  # a changed text: the parts would contradict it, so they stay home
    assert "content" not in blocks_to_items([Block.user("q"), reasoning, answer])[1]


async def test_simulated_gpt5_phases_survive_a_stateless_session(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(
        Reply(text="Let me look that up.", tool_calls=[ToolCall("get_weather", {"city": "Paris"}, call_id="c1")]),
        Reply(text="Sunny in Paris."),
        Reply(text="You're welcome."),
    )
    eng = ResponsesEngine("gpt-5.5", api_key="k", base_url=sim.openai_url, mode="stateless", tools=[WEATHER])
    turn = Turn(blocks=[Block.user("Weather in Paris?")])
    await eng.run_inference(turn)
    turn.append(Block.tool_use("c1", "sunny"))
    await eng.run_inference(turn)
    phases = [b.payload.get(PAYLOAD_PHASE) for b in turn.blocks if b.kind is BlockKind.LLM_TEXT]
    assert phases == ["commentary", "final_answer"]
    turn.append(Block.user("Thanks"))
    await eng.run_inference(turn)
    sent = [i for i in sim.requests[-1].body["input"] if i.get("role") == "assistant"]
    assert [(i.get("id", "")[:4], i["phase"]) for i in sent] == [("msg_", "commentary"), ("msg_", "final_answer")]
    rid = str(turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)])
    assert [m.get("phase") for m in sim.context_items(rid) if m.get("role") == "assistant"] == [
        "commentary",
        "final_answer",
    ]


def _of(rid: str, *blocks: Block | None) -> list[Block]:
    out = [b for b in blocks if b is not None]
    for b in out:
        BLOCK_META_RESPONSE_ID.set(b.metadata, rid)
    return out


def test_an_annotated_message_after_its_responses_replayed_reasoning_keeps_its_id() -> None:
    """Reasoning, a hosted call, then an annotated message (code interpreter's shape): the reasoning goes
    with the call, so the message may go with its id, annotations and all; not when the reasoning stays
    home, nor when another response's block came between (the run its reasoning began is broken)."""
    cited = {"type": "container_file_citation", "container_id": "cntr_1", "file_id": "cfile_1"}
    cited |= {"filename": "plot.png", "start_index": 0, "end_index": 4}
    message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed"}
    message["content"] = [{"type": "output_text", "text": "plot", "annotations": [cited]}]
    call = {"type": "code_interpreter_call", "id": "ci_1", "status": "completed", "container_id": "cntr_1"}
    call |= {"code": "print(1)", "outputs": None}

    def response(encrypted: bool) -> list[Block]:
        reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
        if encrypted:
            reasoning["encrypted_content"] = "gAAAA-sealed"
        return _of("resp_1", item_to_block(reasoning), item_to_block(call), item_to_block(message))

    blocks = [Block.user("plot it"), *response(True)]
    sent = blocks_to_items(blocks)
    assert [i.get("type") for i in sent] == [None, "reasoning", "code_interpreter_call", "message"]
    assert sent[3]["id"] == "msg_1" and sent[3]["content"][0]["annotations"] == [cited]
    plain = {"role": "assistant", "content": "plot"}
    assert blocks_to_items([Block.user("plot it"), *response(False)])[2] == plain  # no reasoning went
    between = _of("resp_0", Block.user("meanwhile"))
    assert blocks_to_items([*blocks[:3], *between, blocks[3]])[-1] == plain
