"""`sim.engine(provider)`: an engine of each provider pointed at the simulator, ready for a test."""

from __future__ import annotations

import pytest

import geppetto as gp
from geppetto.simulator import Reply, Simulator


@pytest.mark.parametrize("provider", ["openai-responses", "openai-chat", "anthropic", "gemini"])
async def test_each_provider_s_engine_answers_from_the_simulator(provider: str, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="Hi there."))
    async with geppetto_sim.engine(provider) as engine:
        out = await gp.Session(engine).run("Hello")
    assert out.blocks[-1].text == "Hi there."
    assert len(geppetto_sim.requests) == 1


def test_an_unknown_provider_names_the_known_ones(geppetto_sim: Simulator) -> None:
    with pytest.raises(ValueError, match="unknown provider 'openai'; use one of openai-responses, openai-chat"):
        geppetto_sim.engine("openai")
