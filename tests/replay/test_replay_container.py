"""Claude's code-execution ``container``: the recorded answers that carry one, replayed through the engine,
leave it on the answer's blocks, and the next request names it while it lives (as the recorded follow-up
of the container-reuse cassette does); against the simulator a second run reuses the first one's sandbox."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import httpx
import pytest

from geppetto.providers.anthropic import ClaudeEngine, _container
from geppetto.providers.anthropic._container import CONTAINER
from geppetto.simulator import BuiltinCall, Reply, Simulator
from geppetto.turns import Block, Turn, turn_from_dict, turn_to_dict
from recorded import MISSING, ROOT, Exchange, exchanges

pytestmark = pytest.mark.skipif(not ROOT.is_dir(), reason=MISSING)

CODE = {"type": "code_execution_20260120", "name": "code_execution"}


def _with_container() -> list[Exchange]:
    if not ROOT.is_dir():
        return []
    return [e for e in exchanges() if e.api == "anthropic" and isinstance(e.answer, dict) and "container" in e.answer]


def _replayed(exchange: Exchange) -> ClaudeEngine:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(exchange.status, headers=exchange.headers, content=exchange.body_bytes)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return ClaudeEngine(str(exchange.body["model"]), "k", http=client, builtin_tools=[CODE], stream=False)


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_the_recordings_hold_answers_with_a_container() -> None:
    assert len(_with_container()) >= 5


@pytest.mark.parametrize("exchange", _with_container(), ids=lambda e: e.name)
async def test_a_recorded_container_is_kept_and_named_on_the_follow_up(
    exchange: Exchange, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = exchange.answer["container"]
    engine = _replayed(exchange)
    turn = await engine.run_inference(Turn(blocks=[Block.user("How much is 3 * 12390?")]))
    answer = turn.blocks[1:]
    assert answer and all(CONTAINER.get(b.metadata) == recorded for b in answer)
    turn = turn_from_dict(json.loads(json.dumps(turn_to_dict(turn))))  # a store's round trip keeps it
    turn.append(Block.user("And 4 * 12390?"))
    monkeypatch.setattr(_container, "_now", lambda: _epoch(recorded["expires_at"]) - 60)
    assert engine.build_request(turn)["container"] == recorded["id"]
    monkeypatch.setattr(_container, "_now", lambda: _epoch(recorded["expires_at"]) + 1)
    assert "container" not in engine.build_request(turn)  # expired: the service would refuse it


async def test_the_follow_up_names_the_container_as_the_recorded_one_does(monkeypatch: pytest.MonkeyPatch) -> None:
    first, follow_up = (
        e for e in exchanges() if e.cassette.endswith("test_anthropic_code_execution_tool_container_reuse.yaml")
    )
    engine = _replayed(first)
    turn = await engine.run_inference(Turn(blocks=[Block.user("How much is 3 * 12390?")]))
    turn.append(Block.user("And 4 * 12390?"))
    monkeypatch.setattr(_container, "_now", lambda: _epoch(first.answer["container"]["expires_at"]) - 60)
    assert engine.build_request(turn)["container"] == follow_up.body["container"]


def test_no_code_execution_tool_no_container() -> None:
    turn = Turn(blocks=[Block.user("hi"), Block.llm_text("hello")])
    CONTAINER.set(turn.blocks[1].metadata, {"id": "container_1", "expires_at": "2999-01-01T00:00:00Z"})
    turn.append(Block.user("again"))
    assert "container" not in ClaudeEngine("claude-sonnet-4-5", "k").build_request(turn)
    assert (
        ClaudeEngine("claude-sonnet-4-5", "k", builtin_tools=[CODE]).build_request(turn)["container"] == "container_1"
    )


@pytest.mark.parametrize("stream", [True, False])
async def test_the_simulator_runs_the_follow_up_in_the_same_container(geppetto_sim: Simulator, stream: bool) -> None:
    run = [BuiltinCall("code_execution", "print(3 * 12390)", "37170\n")]
    geppetto_sim.queue(Reply(text="37170.", builtin=run))
    geppetto_sim.queue(Reply(text="49560.", builtin=[BuiltinCall("code_execution", "print(4 * 12390)", "49560\n")]))
    engine: Any = ClaudeEngine("claude-sonnet-4-5", "k", geppetto_sim.url, builtin_tools=[CODE], stream=stream)
    async with engine:
        turn = await engine.run_inference(Turn(blocks=[Block.user("How much is 3 * 12390?")]))
        made = CONTAINER.get(turn.blocks[-1].metadata)
        turn.append(Block.user("And 4 * 12390?"))
        turn = await engine.run_inference(turn)
    assert made is not None and made["id"].startswith("container_")
    first, second = (r.body for r in geppetto_sim.requests if r.path == "/v1/messages")
    assert "container" not in first and second["container"] == made["id"]
    assert CONTAINER.get(turn.blocks[-1].metadata)["id"] == made["id"]  # type: ignore[index]
