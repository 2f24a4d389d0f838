"""``build_engine``: a profile becomes the right engine, settings mapped, unknown settings refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from geppetto import ConfigurationError
from geppetto.profiles import Profile, build_engine
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine
from geppetto.providers.openai_chat import ChatEngine
from geppetto.providers.openai_responses import ResponsesEngine


@pytest.fixture(autouse=True)
def _no_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEPPETTO_CONFIG_DIR", str(tmp_path))
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize(
    ("provider", "cls"),
    [
        ("openai-responses", ResponsesEngine),
        ("openai-chat", ChatEngine),
        ("anthropic", ClaudeEngine),
        ("gemini", GeminiEngine),
    ],
)
def test_each_provider_maps_to_its_engine(provider: str, cls: type) -> None:
    engine = build_engine(
        Profile(name="p", provider=provider, model="m-1", temperature=0.5), api_key="k", base_url="http://127.0.0.1:9"
    )
    assert type(engine) is cls
    assert (engine.model, engine.temperature) == ("m-1", 0.5)  # type: ignore[attr-defined]


def test_responses_settings_and_the_max_tokens_alias() -> None:
    profile = Profile(name="r", model="m", mode="conversation", store=True, max_tokens=99)
    engine = build_engine(profile, api_key="k", tools=[{"name": "echo", "description": "Echo.", "parameters": {}}])
    assert isinstance(engine, ResponsesEngine)
    assert (engine.mode, engine.store, engine.max_output_tokens) == ("conversation", True, 99)
    assert [t["name"] for t in engine.tools] == ["echo"]


def test_settings_a_provider_does_not_take_are_refused() -> None:
    with pytest.raises(ConfigurationError) as err:
        build_engine(Profile(name="c", provider="anthropic", model="m", mode="chained"), api_key="k")
    assert str(err.value) == "profile 'c': provider 'anthropic' does not take 'mode'; remove it from the profile"


def test_missing_model_and_missing_key_name_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match=r"names no model; set 'model:' in the profile or pass --model"):
        build_engine(Profile(name="n", provider="gemini"), api_key="k")
    with pytest.raises(ConfigurationError, match=r"set ANTHROPIC_API_KEY, or use --profile sim"):
        build_engine(Profile(name="a", provider="anthropic", model="m"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    engine = build_engine(Profile(name="a", provider="anthropic", model="m"))
    assert isinstance(engine, ClaudeEngine)
