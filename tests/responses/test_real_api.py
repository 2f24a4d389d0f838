"""The seed's real-API tests; they run only when OPENAI_API_KEY is set (model from OPENAI_MODEL)."""

from __future__ import annotations

import os

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


async def test_simple_chained_request() -> None:
    eng = ResponsesEngine(MODEL)
    turn = Turn()
    turn.append(Block.user("Say hello in one word."))
    turn = await eng.run_inference(turn)
    first = _rid(turn.blocks[-1])
    turn.append(Block.user("Now say goodbye in one word."))
    turn = await eng.run_inference(turn)
    assert turn.blocks[-1].kind is BlockKind.LLM_TEXT and _rid(turn.blocks[-1]) != first
    assert eng.server_ignores_state is False


async def test_tool_calling_with_chaining() -> None:
    eng = ResponsesEngine(MODEL, tools=[TOOL], tool_choice="required")
    turn = Turn()
    turn.append(Block.user("What is the weather in Paris? Use the tool."))
    turn = await eng.run_inference(turn)
    call = turn.blocks[-1]
    assert call.kind is BlockKind.TOOL_CALL
    turn.append(Block.tool_use(call.payload["id"], "sunny, 21 C"))
    eng.tool_choice = "none"
    turn = await eng.run_inference(turn)
    assert turn.blocks[-1].kind is BlockKind.LLM_TEXT and eng.server_ignores_state is False


async def test_ten_chained_requests() -> None:
    eng = ResponsesEngine(MODEL, max_output_tokens=16)
    turn = Turn()
    for i in range(10):
        turn.append(Block.user(f"Reply with the number {i} only."))
        turn = await eng.run_inference(turn)
    assert len({_rid(b) for b in turn.blocks if b.kind is BlockKind.LLM_TEXT}) == 10
    assert eng.server_ignores_state is False
