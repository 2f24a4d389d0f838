"""Helpers for the Interactions engine's tests: an engine on the simulator, the interaction requests it
received, and the steps the server holds compared with the Turn's."""

from __future__ import annotations

from typing import Any

from geppetto.providers._retry import RetryPolicy
from geppetto.providers.gemini import InteractionsEngine
from geppetto.providers.gemini._interactions_steps import blocks_to_steps
from geppetto.providers.openai_responses import ResponsesMetrics
from geppetto.simulator import Simulator
from geppetto.turns import BLOCK_META_RESPONSE_ID, Turn

MODEL = "gemini-2.5-flash"
THINKING = "gemini-3-flash-preview"
PATH = "/v1beta/interactions"


def engine(sim: Simulator, **kw: Any) -> InteractionsEngine:
    kw.setdefault("metrics", ResponsesMetrics())  # counts of this test only
    kw.setdefault("retry", RetryPolicy(max_retries=0))
    return InteractionsEngine(kw.pop("model", MODEL), api_key="test-key", base_url=sim.url, **kw)


def creates(sim: Simulator) -> list[dict[str, Any]]:
    """The bodies of every ``interactions.create`` the simulator received, in order."""
    return [r.body for r in sim.requests if r.path == PATH and r.method == "POST"]


def last_interaction(turn: Turn) -> str:
    return str(turn.blocks[-1].metadata[str(BLOCK_META_RESPONSE_ID)])


def assert_server_holds_the_turn(sim: Simulator, turn: Turn) -> None:
    """The history the last interaction continues from equals the Turn's steps, exactly."""
    assert sim.held_steps(last_interaction(turn)) == blocks_to_steps(list(turn.blocks))
