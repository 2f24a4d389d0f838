"""Usage and limits on the command line: ``run --usage``/``--limits``, profile ``limits:``, ``sessions`` columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli_helpers import geppetto

from geppetto.profiles import load_profiles

SIM_LIMITED = """
profiles:
  limited:
    provider: openai-responses
    model: sim-1
    simulator: true
    limits: {max_requests: 1}
"""


def test_run_usage_prints_the_requests_tokens_and_cost(tmp_path: Path) -> None:
    res = geppetto("run", "--profile", "sim", "--with-tools", "--usage", "Weather in Paris?", config_dir=tmp_path)
    assert res.returncode == 0, res.stderr
    line = next(line for line in res.stderr.splitlines() if line.startswith("usage:"))
    assert "2 requests" in line and "1 tool call ·" in line
    assert line.rstrip().endswith("unpriced")  # sim-1 has no price: never shown as $0
    # and the next line says why (genai-prices is in the dev extra, and it does not know sim-1)
    assert "unpriced: genai-prices has no price for this model" in res.stderr


def test_run_usage_without_genai_prices_names_the_prices_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from geppetto.cli._usage import unpriced_hint

    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    hint = unpriced_hint()
    assert hint.startswith("unpriced: genai-prices is not installed (") and "geppetto[prices]" in hint


def test_run_limits_stop_the_tool_loop_and_name_the_fix(tmp_path: Path) -> None:
    res = geppetto(
        "run", "--profile", "sim", "--with-tools", "--limits", "max_requests=1", "Weather?", config_dir=tmp_path
    )
    assert res.returncode != 0
    assert "usage limit max_requests=1 reached" in res.stderr
    # In the command line's terms: the flag, not the Python call a library user would make.
    assert "Raise the limit (--limits max_requests=<more>) or start a new session" in res.stderr
    assert "session.limits" not in res.stderr and "UsageLimits(" not in res.stderr
    assert "error.turn" not in res.stderr


def test_run_limits_refuse_a_bad_entry(tmp_path: Path) -> None:
    res = geppetto("run", "--profile", "sim", "--limits", "max_request=1", "Hi", config_dir=tmp_path)
    assert res.returncode != 0 and "unknown usage limit max_request" in res.stderr


def test_a_profile_limits_key_applies_to_run(tmp_path: Path) -> None:
    (tmp_path / "profiles.yaml").write_text(SIM_LIMITED)
    res = geppetto("run", "--profile", "limited", "--with-tools", "Weather in Oslo?", config_dir=tmp_path)
    assert res.returncode != 0 and "max_requests=1" in res.stderr


def test_a_profile_with_a_wrong_limit_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "profiles.yaml").write_text(SIM_LIMITED.replace("max_requests: 1", "max_requests: -2"))
    profiles, _ = load_profiles(tmp_path / "profiles.yaml")
    problem = profiles["limited"].problem or ""
    assert "profiles.limited.limits" in problem and "max_requests=-2" in problem
    res = geppetto("run", "--profile", "limited", "Hi", config_dir=tmp_path)
    assert res.returncode != 0 and "max_requests=-2" in res.stderr


def test_sessions_list_and_show_carry_the_session_usage(tmp_path: Path) -> None:
    chat = geppetto("chat", "--profile", "sim", "--usage", config_dir=tmp_path, stdin="Weather in Paris?\n/exit\n")
    assert chat.returncode == 0, chat.stderr
    assert "this answer: 2 requests" in chat.stdout
    listed = geppetto("sessions", "list", "--json", config_dir=tmp_path)
    [info] = json.loads(listed.stdout)
    assert info["usage"]["requests"] == 2 and info["usage"]["tool_calls"] == 1
    assert info["usage"]["cost"] is None and info["usage"]["unpriced_requests"] == 2
    table = geppetto("sessions", "list", config_dir=tmp_path)
    assert "unpriced" in table.stdout
    shown = geppetto("sessions", "show", info["session_id"], config_dir=tmp_path)
    assert "usage: 2 requests" in shown.stdout


def test_serve_refuses_a_wrong_limit_before_listening(tmp_path: Path) -> None:
    res = geppetto("serve", "--profile", "sim", "--limits", "max_cost=lots", "--port", "0", config_dir=tmp_path)
    assert res.returncode != 0 and "usage limit max_cost='lots': give a number" in res.stderr
