"""Every engine option is a profile key (``options:``) and a ``-o KEY=VALUE`` flag, declared once in the
family's settings (``geppetto.providers.settings``): a profile with each builds an engine whose requests
use it, ``geppetto profiles show`` prints them, and a wrong one is refused naming the valid keys."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _cli_helpers import geppetto

from geppetto import Block, ConfigurationError, PrefixChangedError, Turn, UsageError
from geppetto.profiles import Profile, build_engine, load_profiles
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine, InteractionsEngine
from geppetto.providers.openai_chat import ChatEngine
from geppetto.providers.openai_responses import ResponsesEngine
from geppetto.providers.settings import (
    SETTINGS,
    ChatSettings,
    ClaudeSettings,
    FamilySettings,
    GeminiSettings,
    InteractionsSettings,
    ResponsesSettings,
)
from geppetto.runtime import EngineSettings, choose_profile, parse_options
from geppetto.simulator import Reply, Simulator, serve
from geppetto.turns import BLOCK_META_MIDDLEWARE, TURN_META_SESSION_ID

FAMILIES: list[tuple[str, type[Any], type[FamilySettings]]] = [
    ("openai-responses", ResponsesEngine, ResponsesSettings),
    ("openai-chat", ChatEngine, ChatSettings),
    ("anthropic", ClaudeEngine, ClaudeSettings),
    ("gemini", GeminiEngine, GeminiSettings),
    ("gemini-interactions", InteractionsEngine, InteractionsSettings),
]
NOT_VALUES = {"model", "api_key", "base_url", "tools", "http", "retry", "timeout", "metrics"}
"""Constructor arguments that are objects or the endpoint, not options a profile can write."""
RESPONSES_ONLY_OBJECTS = {"endpoint_verdict", "verdict_store"}


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEPPETTO_CONFIG_DIR", str(tmp_path))
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with serve() as s:
        yield s


def _profiles(tmp_path: Path, text: str) -> dict[str, Profile]:
    (tmp_path / "profiles.yaml").write_text(text)
    profiles, _ = load_profiles()
    return profiles


def _posts(sim: Simulator, since: int) -> list[dict[str, Any]]:
    return [r.body for r in sim.requests[since:] if r.path == "/v1/responses" and r.method == "POST"]


# -- one declaration ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("provider", "engine_cls", "settings_cls"), FAMILIES)
def test_every_option_keyword_of_an_engine_is_a_settings_field_with_the_same_default(
    provider: str, engine_cls: type[Any], settings_cls: type[FamilySettings]
) -> None:
    assert SETTINGS[provider] is settings_cls
    keywords = set(inspect.signature(engine_cls).parameters) - NOT_VALUES - RESPONSES_ONLY_OBJECTS
    assert set(settings_cls.names()) == keywords
    engine = engine_cls("m-1", api_key="k", base_url="http://127.0.0.1:9")
    assert engine.settings == settings_cls()  # the constructor's defaults are the settings' defaults


@pytest.mark.parametrize(("provider", "engine_cls", "settings_cls"), FAMILIES)
def test_a_profile_option_reaches_the_engine_of_each_family(
    provider: str, engine_cls: type[Any], settings_cls: type[FamilySettings]
) -> None:
    engine = build_engine(
        Profile(name="p", provider=provider, model="m-1", options={"stream": False}),
        api_key="k",
        base_url="http://127.0.0.1:9",
    )
    assert type(engine) is engine_cls
    assert engine.settings.stream is False  # type: ignore[attr-defined]
    assert engine.settings.options() == {"stream": False}  # type: ignore[attr-defined]


def test_assigning_an_option_attribute_later_keeps_the_settings_in_step() -> None:
    engine = ResponsesEngine("m", api_key="k", base_url="http://127.0.0.1:9")
    engine.mode = "chained"
    assert engine.settings.mode == "chained"
    with pytest.raises(ConfigurationError, match="unknown mode 'sideways'"):
        engine.mode = "sideways"


# -- the options the Responses engine gained last, each used by a request ---------------------------------
def test_compact_threshold_and_prompt_cache_key_from_a_profile_go_into_the_request(
    tmp_path: Path, sim: Simulator
) -> None:
    profiles = _profiles(
        tmp_path,
        "profiles:\n  work:\n    provider: openai-responses\n    model: sim-1\n"
        "    options: {compact_threshold: 200000, prompt_cache_key: team-cache, prompt_cache_retention: 24h}\n",
    )
    engine = build_engine(profiles["work"], api_key="sk-sim", base_url=sim.openai_url)
    sim.queue(Reply(text="ok"))
    since = len(sim.requests)
    turn = Turn()
    turn.append(Block.user("hi"))
    asyncio.run(engine.run_inference(turn))
    (body,) = _posts(sim, since)
    assert body["context_management"] == [{"type": "compaction", "compact_threshold": 200000}]
    assert (body["prompt_cache_key"], body["prompt_cache_retention"]) == ("team-cache", "24h")


def test_prompt_cache_key_false_from_a_profile_sends_none(tmp_path: Path) -> None:
    profiles = _profiles(tmp_path, "profiles:\n  p: {model: m, options: {prompt_cache_key: false}}\n")
    engine = build_engine(profiles["p"], api_key="k", base_url="http://127.0.0.1:9")
    assert isinstance(engine, ResponsesEngine)
    turn = Turn()
    turn.append(Block.user("hi"))
    TURN_META_SESSION_ID.set(turn.metadata, "s-1")
    assert "prompt_cache_key" not in engine.build_body(turn, engine.plan(turn))
    default = build_engine(Profile(name="d", model="m"), api_key="k", base_url="http://127.0.0.1:9")
    assert isinstance(default, ResponsesEngine)
    assert default.build_body(turn, default.plan(turn))["prompt_cache_key"].startswith("geppetto-")


def test_background_from_profile_options_runs_a_background_response(tmp_path: Path, sim: Simulator) -> None:
    profiles = _profiles(tmp_path, "profiles:\n  bg: {model: sim-1, options: {background: true}}\n")
    engine = build_engine(profiles["bg"], api_key="sk-sim", base_url=sim.openai_url)
    sim.queue(Reply(text="done"))
    since = len(sim.requests)
    turn = Turn()
    turn.append(Block.user("hi"))
    asyncio.run(engine.run_inference(turn))
    (body,) = _posts(sim, since)
    assert (body["background"], body["store"]) == (True, True)
    assert turn.blocks[-1].text == "done"


def test_prefix_policy_error_from_a_profile_refuses_a_changed_prefix(tmp_path: Path, sim: Simulator) -> None:
    profiles = _profiles(
        tmp_path,
        "profiles:\n  strict:\n    model: sim-1\n    mode: chained\n    reasoning_effort: low\n"
        "    options: {prefix_policy: error}\n",
    )
    engine = build_engine(profiles["strict"], api_key="sk-sim", base_url=sim.openai_url)
    sim.queue(Reply(reasoning="weigh it", text="One."))
    turn = Turn()
    turn.append(Block.system("be brief"))
    turn.append(Block.user("q1"))
    asyncio.run(engine.run_inference(turn))
    turn.blocks[0].payload["text"] = "be thorough"
    BLOCK_META_MIDDLEWARE.set(turn.blocks[0].metadata, "system_prompt")
    turn.blocks[3].payload["text"] = "One!"
    turn.append(Block.user("q2"))
    since = len(sim.requests)
    with pytest.raises(PrefixChangedError, match="middleware 'system_prompt'"):
        asyncio.run(engine.run_inference(turn))
    assert _posts(sim, since) == []  # refused before anything was sent


def test_delete_replaced_conversations_from_a_profile_deletes_the_old_one(tmp_path: Path, sim: Simulator) -> None:
    profiles = _profiles(
        tmp_path,
        "profiles:\n  conv: {model: sim-1, mode: conversation, options: {delete_replaced_conversations: true}}\n",
    )
    engine = build_engine(profiles["conv"], api_key="sk-sim", base_url=sim.openai_url)
    sim.queue(Reply(text="One."), Reply(text="Two."))
    turn = Turn()
    turn.append(Block.user("hi"))
    asyncio.run(engine.run_inference(turn))
    turn.blocks[-1].payload["text"] = "One, edited."  # the server's conversation no longer matches the Turn
    turn.append(Block.user("more"))
    since = len(sim.requests)
    asyncio.run(engine.run_inference(turn))
    deletes = [r.path for r in sim.requests[since:] if r.method == "DELETE"]
    assert len(deletes) == 1 and deletes[0].startswith("/v1/conversations/conv")


# -- refused, naming the fix ---------------------------------------------------------------------------------
def test_an_unknown_option_breaks_that_profile_and_names_the_valid_keys(tmp_path: Path) -> None:
    profiles = _profiles(
        tmp_path,
        "profiles:\n  ok: {model: m}\n  typo: {provider: anthropic, model: c, options: {prompt_cach: true}}\n",
    )
    assert profiles["ok"].problem is None
    problem = str(profiles["typo"].problem)
    assert (
        "profiles.typo.options: 'prompt_cach' is not an option of anthropic (did you mean 'prompt_cache'?)" in problem
    )
    assert "its options: tool_choice, temperature, max_tokens" in problem and "prefix_policy" in problem
    with pytest.raises(ConfigurationError, match="prompt_cach"):
        build_engine(profiles["typo"], api_key="k")


def test_an_option_of_another_family_or_a_wrong_value_is_refused(tmp_path: Path) -> None:
    profiles = _profiles(
        tmp_path,
        "profiles:\n  chat: {provider: openai-chat, model: m, options: {compact_threshold: 5000}}\n"
        "  low: {model: m, options: {compact_threshold: 50}}\n"
        "  word: {model: m, options: {background: sometimes}}\n",
    )
    assert "'compact_threshold' is not an option of openai-chat" in str(profiles["chat"].problem)
    assert "compact_threshold=50: pass a number of tokens of at least 1000" in str(profiles["low"].problem)
    assert "background='sometimes': write true or false" in str(profiles["word"].problem)


def test_a_shorthand_key_and_the_same_option_disagreeing_is_refused() -> None:
    profile = Profile(name="p", model="m", background=True, options={"background": False})
    with pytest.raises(ConfigurationError, match="sets 'background' twice"):
        build_engine(profile, api_key="k")
    agreed = Profile(name="p", model="m", max_tokens=300, options={"max_output_tokens": 300})
    assert agreed.engine_settings().options() == {"max_output_tokens": 300}  # the shorthand's engine name


# -- the command line --------------------------------------------------------------------------------------
def test_option_values_parse_as_json_where_they_can() -> None:
    parsed = parse_options(["compact_threshold=2000", "background=true", "prefix_policy=error", "text_format={}"])
    assert parsed == {"compact_threshold": 2000, "background": True, "prefix_policy": "error", "text_format": {}}
    assert parse_options([]) is None
    with pytest.raises(UsageError, match="write KEY=VALUE"):
        parse_options(["compact_threshold"])


def test_dash_o_adds_to_the_profile_options_and_is_checked(tmp_path: Path) -> None:
    _profiles(tmp_path, "profiles:\n  work: {model: m, options: {prefix_policy: error}}\n")
    chosen = choose_profile(EngineSettings(profile="work", options={"compact_threshold": 4000}))
    assert chosen.engine_settings().options() == {"prefix_policy": "error", "compact_threshold": 4000}
    with pytest.raises(ConfigurationError, match=r"^-o: 'compact_treshold' is not an option of openai-responses"):
        choose_profile(EngineSettings(profile="work", options={"compact_treshold": 4000}))
    # another provider starts from its own options: the profile's Responses ones do not carry over
    other = choose_profile(EngineSettings(profile="work", provider="anthropic", options={"prompt_cache": False}))
    assert other.engine_settings().options() == {"prompt_cache": False}


def test_profiles_show_prints_the_options(tmp_path: Path) -> None:
    (tmp_path / "profiles.yaml").write_text(
        "profiles:\n  work:\n    model: gpt-5\n    options:\n      compact_threshold: 200000\n"
        "      prefix_policy: error\n      prompt_cache_key: team\n      delete_replaced_conversations: true\n"
        "      background: true\n"
    )
    shown = geppetto("profiles", "show", "work", config_dir=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert (
        "options:\n  compact_threshold: 200000\n  prefix_policy: error\n  prompt_cache_key: team\n"
        "  delete_replaced_conversations: true\n  background: true\n" in shown.stdout
    )


def test_run_takes_dash_o_and_names_the_valid_keys_of_a_wrong_one(tmp_path: Path) -> None:
    good = geppetto("run", "--profile", "sim", "-o", "compact_threshold=200000", "-o", "prefix_policy=error", "hi",
                    config_dir=tmp_path)  # fmt: skip
    assert good.returncode == 0, good.stderr
    assert "hi" in good.stdout
    bad = geppetto("run", "--profile", "sim", "--option", "compact_threshold=12", "hi", config_dir=tmp_path)
    assert bad.returncode == 2
    assert "-o: compact_threshold=12: pass a number of tokens of at least 1000" in bad.stderr
    unknown = geppetto("chat", "--profile", "sim", "-o", "thinking_budget=100", config_dir=tmp_path, stdin="/exit\n")
    assert unknown.returncode == 2
    assert "'thinking_budget' is not an option of openai-responses" in unknown.stderr
    assert "compact_threshold" in unknown.stderr  # the valid keys are named


def test_a_flag_wins_over_the_profile_however_either_was_written(tmp_path: Path) -> None:
    _profiles(
        tmp_path, "profiles:\n  w: {model: m, background: true, options: {mode: chained, compact_threshold: 4000}}\n"
    )
    by_flag = choose_profile(EngineSettings(profile="w", mode="stateless", options={"background": False}))
    assert by_flag.engine_settings().options() == {"mode": "stateless", "compact_threshold": 4000}
