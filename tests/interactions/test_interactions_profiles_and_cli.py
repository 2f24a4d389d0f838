"""``provider: gemini-interactions`` in profiles, ``--provider gemini-interactions`` on the command line
(tests/cli/test_cli_interactions.py), and ``geppetto serve`` sessions on the Interactions engine."""

from __future__ import annotations

import pytest

from geppetto import ConfigurationError
from geppetto.profiles import PROVIDERS, Profile, build_engine
from geppetto.providers.gemini import InteractionsEngine


def test_a_profile_builds_the_interactions_engine_with_its_settings() -> None:
    profile = Profile(
        name="g", provider="gemini-interactions", model="gemini-2.5-flash", mode="stateless", max_tokens=64,
        reasoning_effort="low", temperature=0.5,
    )  # fmt: skip
    engine = build_engine(profile, api_key="k", base_url="http://127.0.0.1:9")
    assert isinstance(engine, InteractionsEngine)
    assert (engine.mode, engine.max_output_tokens, engine.thinking_level, engine.temperature) == (
        "stateless", 64, "low", 0.5,
    )  # fmt: skip
    assert PROVIDERS["gemini-interactions"] == ("GEMINI_API_KEY", "GOOGLE_API_KEY")


def test_a_mode_the_interactions_api_does_not_have_is_refused() -> None:
    profile = Profile(name="g", provider="gemini-interactions", model="m", mode="conversation")
    with pytest.raises(ConfigurationError, match="use one of chained, stateless"):
        build_engine(profile, api_key="k")
