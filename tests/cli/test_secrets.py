"""No key leaks: with distinctive keys in the environment, nothing the command or the library writes (output,
JSON events, log lines, saved turns, the session store, error messages, reprs and tracebacks) holds one."""

from __future__ import annotations

import socket
import traceback
from pathlib import Path

import pytest
from _cli_helpers import geppetto

import geppetto as gp
from geppetto.providers._retry import RetryPolicy
from geppetto.simulator import Simulator

KEYS = {
    "OPENAI_API_KEY": "sk-LEAKCHECK-openai-7f3a9c",
    "ANTHROPIC_API_KEY": "sk-ant-LEAKCHECK-anthropic-2b8e1d",
    "GEMINI_API_KEY": "LEAKCHECK-gemini-5c0f4a",
}


def _assert_clean(text: str | bytes, where: str) -> None:
    data = text.encode() if isinstance(text, str) else text
    for name, key in KEYS.items():
        assert key.encode() not in data, f"{name} leaked into {where}"
        assert b"LEAKCHECK" not in data, f"a key fragment leaked into {where}"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_command_writes_no_key_anywhere(tmp_path: Path, geppetto_sim: Simulator) -> None:
    saved = tmp_path / "turn.yaml"
    runs = [
        (
            "run",
            "--provider",
            "openai-responses",
            "--base-url",
            geppetto_sim.openai_url,
            "--model",
            "sim-1",
            "--json",
            "--with-logging",
            "--with-tools",
            "--save-turn",
            str(saved),
            "Weather in Paris?",
        ),
        (
            "run",
            "--provider",
            "openai-chat",
            "--base-url",
            geppetto_sim.openai_url,
            "--model",
            "sim-1",
            "--with-logging",
            "Hi",
        ),
        ("run", "--provider", "anthropic", "--base-url", geppetto_sim.url, "--model", "sim-1", "--json", "Hi"),
        ("run", "--provider", "gemini", "--base-url", geppetto_sim.url, "--model", "sim-1", "--json", "Hi"),
        (
            "run",
            "--provider",
            "openai-chat",
            "--base-url",
            f"http://127.0.0.1:{_closed_port()}/v1",
            "--model",
            "m",
            "Hi",
        ),
        ("profiles", "list", "--json"),
        ("profiles", "show", "sim"),
    ]
    for args in runs:
        out = geppetto(*args, config_dir=tmp_path, **KEYS)
        _assert_clean(out.stdout + out.stderr, " ".join(args[:3]))
    sent = [
        r.headers.get("authorization", "") + r.headers.get("x-api-key", "") + r.headers.get("x-goog-api-key", "")
        for r in geppetto_sim.requests
    ]
    assert all(any(key in h for h in sent) for key in KEYS.values())  # every key was in play, and went out
    geppetto_sim.fail_next(401)
    refused = geppetto(
        "run",
        "--provider",
        "openai-chat",
        "--base-url",
        geppetto_sim.openai_url,
        "--model",
        "sim-1",
        "Hi",
        config_dir=tmp_path,
        **KEYS,
    )
    assert refused.returncode == 1 and "OPENAI_API_KEY" in refused.stderr  # names the variable, not its value
    _assert_clean(refused.stdout + refused.stderr, "a refused key's error")
    chat = geppetto(
        "chat",
        "--provider",
        "openai-responses",
        "--base-url",
        geppetto_sim.openai_url,
        "--model",
        "sim-1",
        config_dir=tmp_path,
        stdin="Hello\n/inspect\n/save " + str(tmp_path / "c.json") + "\n/exit\n",
        **KEYS,
    )
    assert chat.returncode == 0, chat.stderr
    _assert_clean(chat.stdout + chat.stderr, "chat")
    listed = geppetto("sessions", "list", "--json", config_dir=tmp_path, **KEYS)
    _assert_clean(listed.stdout + listed.stderr, "sessions list")
    assert saved.exists() and (tmp_path / "c.json").exists()
    for path in [saved, tmp_path / "c.json", *sorted((tmp_path / "data").glob("sessions.db*"))]:
        _assert_clean(path.read_bytes(), str(path))


@pytest.mark.parametrize("provider", ["openai-responses", "openai-chat", "anthropic", "gemini"])
async def test_errors_carry_no_key_in_their_text_repr_or_traceback(provider: str, geppetto_sim: Simulator) -> None:
    key = KEYS["OPENAI_API_KEY"]
    retry = RetryPolicy(max_retries=0)
    engine = geppetto_sim.engine(provider, api_key=key, retry=retry)
    async with engine:
        for fault in ({"status": 401}, {"status": 500}, {"drop_after": 1}):
            geppetto_sim.fail_next(**fault)  # type: ignore[arg-type]
            with pytest.raises(gp.ProviderError) as err:
                await gp.Session(engine).run("Hi")
            exc = err.value
            text = "".join(traceback.format_exception(exc)) + repr(exc) + repr(exc.body) + repr(vars(exc))
            _assert_clean(text, f"{provider} {fault}")
    assert repr(engine).count(key) == 0
