"""Fault-matrix cells on the simulator's real socket: an expired chain is resent whole once and then chains
again, and 200 sessions at once over one shared transport each get their own answer."""

from __future__ import annotations

import asyncio

import geppetto as gp
from geppetto.providers import HttpTransport
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.simulator import Simulator


async def test_an_expired_chain_is_resent_whole_once_then_chains_again(geppetto_sim: Simulator) -> None:
    async with geppetto_sim.engine("openai-responses", mode="chained") as engine:
        session = gp.Session(engine)
        await session.run("One")
        first = geppetto_sim.requests[-1]
        parent = session.latest.blocks[-1].metadata["geppetto.response_id@v1"]  # type: ignore[union-attr]
        geppetto_sim.forget(parent)
        await session.run("Two")
        expired, resent = geppetto_sim.requests[-2:]
        assert expired.body["previous_response_id"] == parent  # tried the chain, refused
        assert "previous_response_id" not in resent.body  # then the whole Turn, once
        assert len(resent.body["input"]) == 3  # One, its answer, Two
        await session.run("Three")
        chained = geppetto_sim.requests[-1]
        assert chained.body["previous_response_id"] and len(chained.body["input"]) == 1
        assert first.body.get("previous_response_id") is None


async def test_two_hundred_sessions_at_once_get_their_own_answers(geppetto_sim: Simulator) -> None:
    transport = HttpTransport(geppetto_sim.openai_url, provider="openai", max_in_flight=32)

    async def one(i: int) -> str:
        engine = ResponsesEngine("sim-1", api_key="sk-sim", base_url=geppetto_sim.openai_url, http=transport)
        out = await gp.Session(engine).run(f"session {i} asks")
        return out.blocks[-1].text

    async with transport:
        answers = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(200))), 120)
    assert answers == [f"You said: session {i} asks" for i in range(200)]
    assert len(geppetto_sim.requests) == 200
