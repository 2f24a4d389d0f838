"""Responses annotations survive a stateless replay: each genuine recorded answer whose messages carry
annotations (code interpreter's ``container_file_citation``, file search's ``file_citation``, web
search's ``url_citation``), replayed through the engine with ``mode="stateless"``, is sent back in the
next request as the output message it was, annotations and all, in a body the official OpenAPI spec
accepts. The code-interpreter answers put a reasoning item and a ``code_interpreter_call`` before their
message: the message goes with its id because its response's reasoning went with the call (the recorded
follow-up request of that cassette sends the same three items, ids and all, and the service answered it).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator._validate import validate
from geppetto.turns import Block, Turn
from recorded import MISSING, ROOT, Exchange, exchanges

pytestmark = pytest.mark.skipif(not ROOT.is_dir(), reason=MISSING)


def _answer(exchange: Exchange) -> dict[str, Any]:
    if not exchange.streamed:
        return dict(exchange.response["parsed_body"])
    for line in str(exchange.response["body"]["string"]).splitlines():
        if line.startswith("data:") and '"response.completed"' in line:
            return dict(json.loads(line[5:])["response"])
    raise AssertionError("the recorded stream has no response.completed")


def _annotated(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The output messages with at least one annotated part."""
    return [
        item
        for item in output
        if item.get("type") == "message" and any(p.get("annotations") for p in item.get("content") or [])
    ]


def _with_annotations() -> list[Exchange]:
    if not ROOT.is_dir():
        return []
    return [
        e for e in exchanges() if e.api == "responses" and e.status < 400 and _annotated(_answer(e).get("output") or [])
    ]


CASES = _with_annotations()


def test_the_recordings_hold_annotated_answers_after_reasoning() -> None:
    """The cases below include answers whose annotated message follows reasoning and a hosted call."""
    kinds = {
        a["type"]
        for e in CASES
        for m in _annotated(_answer(e)["output"])
        for p in m["content"]
        for a in p["annotations"]
    }
    assert {"container_file_citation", "file_citation", "url_citation"} <= kinds
    reasoned = [
        e for e in CASES if [i["type"] for i in _answer(e)["output"]][:2] == ["reasoning", "code_interpreter_call"]
    ]
    assert len(reasoned) >= 2


@pytest.mark.parametrize("exchange", CASES, ids=lambda e: e.name)
async def test_a_stateless_replay_sends_the_annotations_back(exchange: Exchange) -> None:
    seen: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(exchange.status, headers=exchange.headers, content=exchange.body_bytes)

    engine = ResponsesEngine(
        str(exchange.body.get("model") or "gpt-5"),
        api_key="k",
        http=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
        stream=bool(exchange.body.get("stream")),
        mode="stateless",
    )
    turn = await engine.run_inference(Turn(blocks=[Block.user("go on")]))
    await engine.run_inference(Turn(blocks=[*turn.blocks, Block.user("and then?")]))
    body = seen[1]
    assert "previous_response_id" not in body  # the whole conversation again
    validate("CreateResponse", body)
    sent = {item["id"]: item for item in body["input"] if item.get("type") == "message" and "id" in item}
    for message in _annotated(_answer(exchange)["output"]):
        assert message["id"] in sent, f"{message['id']} went back without its id, so without its annotations"
        replayed = sent[message["id"]]
        assert replayed["status"] == "completed"
        assert [p.get("annotations") for p in replayed["content"]] == [
            p.get("annotations") or [] for p in message["content"]
        ]
        assert [p.get("text") for p in replayed["content"]] == [p.get("text") for p in message["content"]]
    output = _answer(exchange)["output"]
    reasoning = [i["id"] for i in output if i.get("type") == "reasoning"]
    if reasoning:  # the API refuses a message id without the reasoning of its response
        assert reasoning[0] in [i.get("id") for i in body["input"] if i.get("type") in ("reasoning", "item_reference")]
