"""The four engines on the shared simulator, each with a model its API serves and no retries: what the tests
that run one scenario on every engine (streaming, structured output, tool context) parametrize over."""

from __future__ import annotations

from typing import Any

from geppetto.providers._retry import RetryPolicy
from geppetto.simulator import Simulator

FAST = RetryPolicy(max_retries=0)
MODELS = {
    "openai-responses": "sim-1",
    "openai-chat": "sim-1",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
}
PROVIDERS = list(MODELS)


def engine(sim: Simulator, provider: str, **options: Any) -> Any:
    """``provider``'s engine on ``sim`` (``model=`` overrides its model; other options go to the engine)."""
    return sim.engine(provider, model=options.pop("model", MODELS[provider]), retry=FAST, **options)
