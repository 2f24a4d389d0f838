"""profiles.yaml mistakes: a top-level typo is an error naming the allowed keys and the close match; a typo
inside one profile breaks that profile only (`sim` and the others still work); a user profile named `sim`
never replaces the built-in one."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli_helpers import geppetto

from geppetto import ConfigurationError
from geppetto.profiles import SIM_PROFILE, build_engine, load_profiles


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profiles.yaml"
    path.write_text(text)
    return path


def test_a_top_level_typo_names_the_allowed_keys_and_the_close_match(tmp_path: Path) -> None:
    path = _write(tmp_path, "defualt: work\nprofiles:\n  work: {provider: openai-chat, model: m}\n")
    with pytest.raises(ConfigurationError) as err:
        load_profiles(path)
    assert str(err.value) == f"{path}: 'defualt' is not a setting (did you mean 'default'?); allowed: default, profiles"


def test_a_typo_in_one_profile_breaks_that_profile_only(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "profiles:\n  good: {provider: openai-chat, model: m}\n  bad: {provider: openai-chat, modell: m}\n",
    )
    profiles, _ = load_profiles(path)
    assert profiles["sim"] == SIM_PROFILE
    assert profiles["good"].problem is None and profiles["good"].model == "m"
    problem = profiles["bad"].problem
    assert problem is not None
    assert (
        "profiles.bad.'modell' is not a setting (did you mean 'model'?); allowed: api_key_env, background, base_url"
        in problem
    )
    with pytest.raises(ConfigurationError, match="did you mean 'model'"):
        build_engine(profiles["bad"], api_key="k")


def test_the_command_runs_other_profiles_and_names_the_broken_one(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    _write(config, "profiles:\n  bad: {provider: openai-chat, temprature: 0.2}\n")
    ok = geppetto("run", "--profile", "sim", "Hello", config_dir=config)
    assert ok.returncode == 0, ok.stderr
    broken = geppetto("run", "--profile", "bad", "Hello", config_dir=config)
    assert broken.returncode == 2
    assert "profiles.bad.'temprature' is not a setting (did you mean 'temperature'?)" in broken.stderr


def test_a_user_profile_named_sim_does_not_replace_the_built_in(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    _write(config, "profiles:\n  sim: {provider: anthropic, model: claude-sonnet-4-5}\n")
    profiles, _ = load_profiles(config / "profiles.yaml")
    assert profiles["sim"].provider == SIM_PROFILE.provider and profiles["sim"].simulator
    out = geppetto("run", "--profile", "sim", "Hello", config_dir=config)
    assert out.returncode == 0, out.stderr
    assert "defines a profile named 'sim', which is ignored" in out.stderr
