from pathlib import Path

import pytest

from geppetto import ConfigurationError
from geppetto.profiles import FLAGS_PROFILE, SIM_PROFILE, Profile, load_profiles, profiles_path, resolve_api_key


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEPPETTO_CONFIG_DIR", str(tmp_path))
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "WORK_KEY"):
        monkeypatch.delenv(var, raising=False)


def test_no_file_gives_the_builtin_sim_profile_only() -> None:
    assert load_profiles() == ({"sim": SIM_PROFILE}, None)


def test_profiles_file_is_read_from_the_config_dir(tmp_path: Path) -> None:
    assert profiles_path() == tmp_path / "profiles.yaml"
    profiles_path().write_text(
        "default: work\nprofiles:\n  work:\n    provider: anthropic\n    model: claude-x\n    api_key_env: WORK_KEY\n"
        "    temperature: 0.2\n"
    )
    profiles, default = load_profiles()
    assert default == "work"
    assert profiles["work"] == Profile(
        name="work", provider="anthropic", model="claude-x", api_key_env="WORK_KEY", temperature=0.2
    )
    assert profiles["sim"] == SIM_PROFILE


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("profiles:\n  p:\n    provider: nope\n", "use one of openai-responses"),
        ("profiles:\n  p:\n    modle: x\n", "profiles.p.'modle' is not a setting (did you mean 'model'?); allowed: "),
        ("profiles: [1, 2]\n", "expected a mapping"),
        ("default: missing\nprofiles: {}\n", "default profile 'missing' is not defined"),
        ("profiles: {p: [unclosed\n", "not valid YAML at line 2; fix or remove the file"),
        ("profiles:\n  p:\n    temperature: hot\n", "profiles.p.temperature is 'hot'; write a number such as 0.2"),
        ("profiles:\n  p:\n    max_tokens: lots\n", "profiles.p.max_tokens is 'lots'; write a whole number"),
        ("profiles:\n  p:\n    max_tokens: 0\n", "profiles.p.max_tokens must be at least 1"),
        ("profiles:\n  p:\n    store: 'no'\n", "profiles.p.store is 'no'; write true or false"),
        ("profiles:\n  p:\n    background: 'yes'\n", "profiles.p.background is 'yes'; write true or false"),
        ("profiles:\n  p:\n    temperature: true\n", "profiles.p.temperature is True"),
        ("profiles:\n  p:\n    mode: chain\n", "profiles.p.mode is 'chain'; write stateless, chained, conversation"),
    ],
)
def test_bad_profiles_files_name_the_fix(text: str, fragment: str) -> None:
    """A file-level mistake fails loading; a mistake in profile ``p`` fails that profile only."""
    profiles_path().write_text(text)
    try:
        profiles, _ = load_profiles()
    except ConfigurationError as err:
        message = str(err)
    else:
        assert profiles["sim"] == SIM_PROFILE
        message = profiles["p"].problem or ""
    assert fragment in message
    assert str(profiles_path()) in message


def test_missing_key_names_the_variable_and_the_offline_profile() -> None:
    with pytest.raises(ConfigurationError) as err:
        resolve_api_key(Profile(name="g", provider="gemini"))
    assert str(err.value) == (
        "no API key for profile 'g': set GEMINI_API_KEY or GOOGLE_API_KEY, or use --profile sim to run offline"
    )


def test_missing_key_without_a_profile_names_the_file_not_a_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError) as err:
        resolve_api_key(Profile(name=FLAGS_PROFILE))
    assert str(err.value) == (
        f"no API key: set OPENAI_API_KEY, define a profile in {profiles_path()}, or use --profile sim to run offline"
    )


def test_key_comes_from_the_profile_variable_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "standard")
    monkeypatch.setenv("WORK_KEY", "custom")
    assert resolve_api_key(Profile(name="w", api_key_env="WORK_KEY")) == "custom"
    assert resolve_api_key(Profile(name="d")) == "standard"


def test_overrides_apply_only_given_values() -> None:
    p = SIM_PROFILE.with_overrides(model="sim-2", mode=None)
    assert p == Profile(name="sim", provider="openai-responses", model="sim-2", simulator=True, mode="chained")


def test_a_background_profile_builds_a_background_engine() -> None:
    from geppetto.profiles import build_engine

    profiles_path().write_text("profiles:\n  bg:\n    model: gpt-5.2\n    background: true\n")
    profiles, _ = load_profiles()
    assert profiles["bg"].background is True
    assert build_engine(profiles["bg"], api_key="sk-test").background is True  # type: ignore[attr-defined]
    claude = Profile(name="c", provider="anthropic", model="claude-x", background=True)
    with pytest.raises(ConfigurationError, match="provider 'anthropic' does not take 'background'"):
        build_engine(claude, api_key="sk-test")
