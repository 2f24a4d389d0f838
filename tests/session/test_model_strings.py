"""``gp.engine_for("provider:model")`` and ``Session("provider:model")``: each prefix, the simulator started
in-process and stopped with the engine, keys from the usual variables, and the errors for a wrong prefix,
setting or a missing key."""

from __future__ import annotations

import pytest

import geppetto as gp
from geppetto.simulator import Simulator

PROVIDER_CLASSES = {
    "openai": "ResponsesEngine",
    "openai-chat": "ChatEngine",
    "anthropic": "ClaudeEngine",
    "gemini": "GeminiEngine",
    "gemini-interactions": "InteractionsEngine",
}
MODELS = {
    "openai": "sim-1",
    "openai-chat": "sim-1",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
    "gemini-interactions": "gemini-2.5-flash",
}
KEYS = {
    "openai": "OPENAI_API_KEY",
    "openai-chat": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "gemini-interactions": "GEMINI_API_KEY",
}


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("prefix", list(PROVIDER_CLASSES))
async def test_each_prefix_builds_its_engine_with_the_key_from_the_environment_and_a_base_url(
    geppetto_sim: Simulator, prefix: str, monkeypatch: pytest.MonkeyPatch, no_keys: None
) -> None:
    monkeypatch.setenv(KEYS[prefix], "sk-from-env")
    base_url = geppetto_sim.openai_url if prefix.startswith("openai") else geppetto_sim.url
    async with gp.engine_for(f"{prefix}:{MODELS[prefix]}", base_url=base_url) as engine:
        assert type(engine).__name__ == PROVIDER_CLASSES[prefix]
        assert engine.model == MODELS[prefix]  # type: ignore[attr-defined]
        turn = await gp.Session(engine).run("hello there")
    assert turn.blocks[-1].text == "You said: hello there"
    sent = [r for r in geppetto_sim.requests if r.method == "POST"][-1]
    assert "sk-from-env" in str(sent.headers)


@pytest.mark.parametrize("prefix", list(PROVIDER_CLASSES))
def test_a_missing_key_names_the_variable(prefix: str, no_keys: None) -> None:
    with pytest.raises(gp.ConfigurationError) as caught:
        gp.engine_for(f"{prefix}:{MODELS[prefix]}")
    message = str(caught.value)
    assert KEYS[prefix] in message and "api_key=" in message and "'sim'" in message


def test_an_api_key_given_needs_no_variable(no_keys: None) -> None:
    engine = gp.engine_for("anthropic:claude-sonnet-4-5", api_key="sk-given", max_tokens=512)
    assert type(engine).__name__ == "ClaudeEngine"


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (
            "opena:gpt-4.1",
            "unknown model prefix 'opena' in 'opena:gpt-4.1' (did you mean 'openai:'?); use one of "
            "openai:, openai-chat:, anthropic:, gemini:, gemini-interactions:, sim:",
        ),
        ("claude:claude-sonnet-4-5", "unknown model prefix 'claude'"),
        ("gpt-4.1", "model string 'gpt-4.1' names no provider: write it as 'provider:model', e.g. 'openai:gpt-4.1'"),
        ("openai:", "model string 'openai:' names no model: write e.g. 'openai:gpt-4.1-mini'"),
    ],
)
def test_a_wrong_model_string_lists_the_prefixes(model: str, expected: str) -> None:
    with pytest.raises(gp.UsageError) as caught:
        gp.engine_for(model)
    assert expected in str(caught.value)


def test_an_unknown_setting_lists_the_accepted_ones() -> None:
    with pytest.raises(gp.UsageError, match="engine_for does not take 'temprature'; it takes api_key, api_key_env"):
        gp.engine_for("openai:gpt-4.1", temprature=0.2)
    with pytest.raises(gp.ConfigurationError, match="is not an http"):
        gp.engine_for("openai:gpt-4.1", api_key="k", base_url="localhost:8000")


@pytest.mark.parametrize(
    ("model", "cls", "answer"),
    [
        ("sim", "ResponsesEngine", "sim-1"),
        ("sim:", "ResponsesEngine", "sim-1"),
        ("sim:openai-chat", "ChatEngine", "gpt-4.1-mini"),
        ("sim:anthropic", "ClaudeEngine", "claude-sonnet-4-5"),
        ("sim:gemini:gemini-2.5-flash", "GeminiEngine", "gemini-2.5-flash"),
    ],
)
async def test_sim_runs_the_simulator_in_process_and_stops_it_with_the_engine(
    model: str, cls: str, answer: str, no_keys: None
) -> None:
    engine = gp.engine_for(model)
    sim = engine.simulator  # type: ignore[attr-defined]
    assert type(engine).__name__ == cls and engine.model == answer  # type: ignore[attr-defined]
    turn = await gp.Session(engine).run("hello")
    assert turn.blocks[-1].text == "You said: hello"
    assert sim._server is not None and sim._server.thread.is_alive()
    await engine.aclose()  # type: ignore[attr-defined]
    assert not sim._server.thread.is_alive()


async def test_session_takes_a_model_string_and_closes_its_engine(no_keys: None) -> None:
    async with gp.Session("sim:anthropic") as session:
        sim = session.engine.engine.simulator  # type: ignore[attr-defined]
        events = [e async for e in session.stream("hi")]
        assert isinstance(events[-1], gp.events.EventFinal)
        assert session.latest is not None and session.latest.blocks[-1].text == "You said: hi"
    assert not sim._server.thread.is_alive()
    with pytest.raises(gp.UsageError, match="unknown model prefix"):
        gp.Session("antrhopic:claude-sonnet-4-5")


async def test_a_session_closes_only_an_engine_it_made(geppetto_sim: Simulator) -> None:
    async with geppetto_sim.engine("openai-responses") as engine:
        async with gp.Session(engine) as session:
            await session.run("one")
        # the engine given stays open: a second session uses it
        turn = await gp.Session(engine).run("two")
    assert turn.blocks[-1].text == "You said: two"
