"""Smoke tests against the real services. Each runs only when its key variable is set (and costs a few tokens).

Models can be changed with GEPPETTO_TEST_CHAT_MODEL, GEPPETTO_TEST_CLAUDE_MODEL and GEPPETTO_TEST_GEMINI_MODEL.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest

from geppetto import Block, Turn
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine
from geppetto.providers.openai_chat import ChatEngine
from geppetto.turns import TURN_META_STOP_REASON


def _needs(*names: str) -> pytest.MarkDecorator:
    missing = not any(os.environ.get(n) for n in names)
    return pytest.mark.skipif(missing, reason=f"set {' or '.join(names)} to run this test against the real API")


CASES = [
    pytest.param(
        lambda: ChatEngine(os.environ.get("GEPPETTO_TEST_CHAT_MODEL", "gpt-4o-mini"), max_tokens=20),
        marks=[pytest.mark.realapi, _needs("OPENAI_API_KEY")],
        id="chat",
    ),
    pytest.param(
        lambda: ClaudeEngine(os.environ.get("GEPPETTO_TEST_CLAUDE_MODEL", "claude-haiku-4-5"), max_tokens=20),
        marks=[pytest.mark.realapi, _needs("ANTHROPIC_API_KEY")],
        id="claude",
    ),
    pytest.param(
        lambda: GeminiEngine(os.environ.get("GEPPETTO_TEST_GEMINI_MODEL", "gemini-2.5-flash"), max_tokens=200),
        marks=[pytest.mark.realapi, _needs("GEMINI_API_KEY", "GOOGLE_API_KEY")],
        id="gemini",
    ),
]


@pytest.mark.parametrize("make", CASES)
async def test_a_real_provider_answers_in_text(make: Callable[[], Any]) -> None:
    turn = Turn()
    turn.append(Block.user("Reply with the single word: pong"))
    out = await make().run_inference(turn)
    assert "pong" in out.blocks[-1].text.lower()
    assert TURN_META_STOP_REASON.get(out.metadata) in ("end_turn", "max_tokens")
