"""A middleware that sets a different system prompt on every request turns every request into a whole-Turn
resend: the engine says so once, as a :class:`geppetto.ChainingWarning` naming ``instructions_mode=True``, which
keeps the chain (the system prompt then goes as ``instructions`` with every request)."""

from __future__ import annotations

import warnings
from itertools import count

import geppetto as gp
from geppetto.middleware import system_prompt
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import Simulator


def _changing_system_prompt() -> gp.Middleware:
    """A new system prompt on every request, set through the built-in middleware (which marks its block)."""
    n = count()

    def middleware(next_handler: gp.Handler) -> gp.Handler:
        async def handler(turn: gp.Turn) -> gp.Turn:
            return await system_prompt(f"It is now step {next(n)}.")(next_handler)(turn)

        return handler

    return middleware


async def _run(geppetto_sim: Simulator, **options: object) -> list[warnings.WarningMessage]:
    async with ResponsesEngine("sim-1", api_key="sk-test", base_url=geppetto_sim.openai_url, **options) as engine:
        session = gp.Session(engine, middlewares=[_changing_system_prompt()])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", gp.ChainingWarning)
            for text in ("one", "two", "three"):
                await session.run(text)
    return [w for w in caught if issubclass(w.category, gp.ChainingWarning)]


async def test_a_system_prompt_changed_on_every_request_warns_naming_instructions_mode(
    geppetto_sim: Simulator,
) -> None:
    caught = await _run(geppetto_sim)
    posts = [r for r in geppetto_sim.requests if r.path.endswith("/responses") and r.method == "POST"]
    assert [("previous_response_id" in r.body) for r in posts] == [False, False, False]  # never chained
    assert len(caught) == 2  # the second and third requests fell back; Python's default filter shows one
    message = str(caught[0].message)
    assert (
        "the system prompt (block #0, from the middleware 'system_prompt') changed since the last response" in message
    )
    assert "ResponsesEngine(..., instructions_mode=True)" in message


async def test_instructions_mode_keeps_the_chain_and_does_not_warn(geppetto_sim: Simulator) -> None:
    caught = await _run(geppetto_sim, instructions_mode=True)
    posts = [r for r in geppetto_sim.requests if r.path.endswith("/responses") and r.method == "POST"]
    assert [("previous_response_id" in r.body) for r in posts] == [False, True, True]
    assert [r.body["instructions"] for r in posts] == [f"It is now step {i}." for i in range(3)]
    assert caught == []
