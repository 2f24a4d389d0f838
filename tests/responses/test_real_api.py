"""The seed's real-API tests; they run only when OPENAI_API_KEY is set (model from OPENAI_MODEL)."""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
import pytest

from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.turns import BLOCK_META_RESPONSE_ID, Block, BlockKind, Turn

pytestmark = [
    pytest.mark.realapi,
    pytest.mark.skipif(not os.environ.get("OPENAI_API_KEY"), reason="OPENAI_API_KEY is not set"),
]
MODEL = os.environ.get("OPENAI_MODEL", "gpt-4.1-mini")
TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _rid(block: Block) -> str:
    return str(block.metadata[str(BLOCK_META_RESPONSE_ID)])


def _recording_client() -> tuple[httpx.AsyncClient, list[dict[str, Any]]]:
    """A client that keeps the body of every POST /responses it sends."""
    bodies: list[dict[str, Any]] = []

    async def record(request: httpx.Request) -> None:
        if request.method == "POST" and request.url.path.endswith("/responses"):
            bodies.append(json.loads(request.content))

    return httpx.AsyncClient(timeout=120, event_hooks={"request": [record]}), bodies


async def test_simple_chained_request() -> None:
    client, bodies = _recording_client()
    async with client:
        eng = ResponsesEngine(MODEL, http=client)
        turn = Turn()
        turn.append(Block.user("Say hello in one word."))
        turn = await eng.run_inference(turn)
        first = _rid(turn.blocks[-1])
        turn.append(Block.user("Now say goodbye in one word."))
        turn = await eng.run_inference(turn)
    assert turn.blocks[-1].kind is BlockKind.LLM_TEXT and _rid(turn.blocks[-1]) != first
    assert [b.get("previous_response_id") for b in bodies] == [None, first]
    assert bodies[1]["input"] == [{"role": "user", "content": "Now say goodbye in one word."}]
    assert eng.server_ignores_state is False


async def test_tool_calling_with_chaining() -> None:
    client, bodies = _recording_client()
    async with client:
        eng = ResponsesEngine(MODEL, tools=[TOOL], tool_choice="get_weather", http=client)
        turn = Turn()
        turn.append(Block.user("What is the weather in Paris? Use the tool."))
        turn = await eng.run_inference(turn)
        call = turn.blocks[-1]
        assert call.kind is BlockKind.TOOL_CALL
        turn.append(Block.tool_use(call.payload["id"], "sunny, 21 C"))
        eng.tool_choice = "none"
        turn = await eng.run_inference(turn)
    assert turn.blocks[-1].kind is BlockKind.LLM_TEXT and eng.server_ignores_state is False
    assert bodies[0]["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert bodies[1]["previous_response_id"] == _rid(call)
    assert bodies[1]["input"] == [
        {"type": "function_call_output", "call_id": call.payload["id"], "output": "sunny, 21 C"}
    ]


async def test_ten_chained_requests() -> None:
    client, bodies = _recording_client()
    async with client:
        eng = ResponsesEngine(MODEL, max_output_tokens=16, http=client)
        turn = Turn()
        answers: list[str] = []
        for i in range(11):
            turn.append(Block.user(f"Reply with the number {i} only."))
            turn = await eng.run_inference(turn)
            answers.append(_rid(turn.blocks[-1]))
    assert len(set(answers)) == 11 and len(bodies) == 11
    # Every request after the first was chained on the previous answer and sent only the new question.
    assert [b.get("previous_response_id") for b in bodies] == [None, *answers[:-1]]
    assert all(
        b["input"] == [{"role": "user", "content": f"Reply with the number {i} only."}] for i, b in enumerate(bodies)
    )
    assert eng.server_ignores_state is False
