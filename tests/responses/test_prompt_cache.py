"""Prompt caching on the Responses engine (issue 31): one ``prompt_cache_key`` per session by default,
configurable or off, ``prompt_cache_retention`` passed through, ``cache_write_tokens`` read into usage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from responses_support import assert_valid_requests, engine

import geppetto as gp
from geppetto import ConfigurationError
from geppetto.providers.openai_responses._answer import usage_of
from geppetto.providers.openai_responses._request import session_cache_key
from geppetto.simulator import Reply, Simulator
from geppetto.turns import TURN_META_SESSION_ID, Block, Turn

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "recorded" / "cassettes"  # a copy kept with the tests


def _keys(sim: Simulator) -> list[Any]:
    return [r.body.get("prompt_cache_key") for r in sim.requests if r.path == "/v1/responses"]


async def test_every_request_of_a_session_carries_the_session_key(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    first = gp.Session(engine(sim))
    await first.run("hello")
    await first.run("again")
    other = gp.Session(engine(sim))
    await other.run("hello")
    key = session_cache_key(first.session_id)
    assert _keys(sim) == [key, key, session_cache_key(other.session_id)]
    assert key != session_cache_key(other.session_id) and len(key) <= 64 and first.session_id not in key
    assert_valid_requests(sim)


async def test_a_turn_without_a_session_carries_no_key(geppetto_sim: Simulator) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="hi"))
    await engine(sim).run_inference(Turn(blocks=[Block.user("hello")]))
    assert _keys(sim) == [None]


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        (None, None),
        (False, None),
        ("my-app-cache", "my-app-cache"),
        (lambda turn: "k-" + TURN_META_SESSION_ID.get(turn.metadata)[:8], "k-abcdefgh"),
        (lambda turn: None, None),
    ],
)
async def test_the_key_can_be_fixed_chosen_or_turned_off(geppetto_sim: Simulator, setting: Any, expected: Any) -> None:
    sim = geppetto_sim
    sim.queue(Reply(text="hi"))
    turn = Turn(blocks=[Block.user("hello")])
    TURN_META_SESSION_ID.set(turn.metadata, "abcdefghijkl")
    await engine(sim, prompt_cache_key=setting, prompt_cache_retention="24h").run_inference(turn)
    body = sim.requests[-1].body
    assert body.get("prompt_cache_key") == expected and body["prompt_cache_retention"] == "24h"
    assert_valid_requests(sim)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"prompt_cache_key": ""}, "at most 64 characters"),
        ({"prompt_cache_key": "k" * 65}, "at most 64 characters"),
        ({"prompt_cache_key": 12}, "at most 64 characters"),
        ({"prompt_cache_retention": "1h"}, "in_memory, 24h"),
    ],
)
def test_bad_cache_settings_name_the_fix(geppetto_sim: Simulator, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        engine(geppetto_sim, **options)


async def test_a_callable_that_gives_a_bad_key_is_refused(geppetto_sim: Simulator) -> None:
    eng = engine(geppetto_sim, prompt_cache_key=lambda turn: "x" * 100)
    with pytest.raises(ConfigurationError, match="prompt_cache_key callable"):
        await eng.run_inference(Turn(blocks=[Block.user("hello")]))


def test_cache_write_tokens_are_read_from_recorded_usage() -> None:
    path = RECORDED / "test_openai_prompt_cache" / "test_openai_responses_prompt_cache_e2e.yaml"
    if not path.exists():
        pytest.skip(f"recorded traffic not found at {path}")
    interactions = yaml.safe_load(path.read_text())["interactions"]
    write, read = (usage_of(i["response"]["parsed_body"]) for i in interactions)
    assert write is not None and read is not None
    assert (write.cache_write_tokens, write.cached_tokens, write.input_tokens) == (4012, 0, 4020)
    assert (read.cache_write_tokens, read.cached_tokens) == (0, 4012)
    assert write.to_dict()["cache_write_tokens"] == 4012
