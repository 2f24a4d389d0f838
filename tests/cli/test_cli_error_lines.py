"""A failed request or stream ends the command with one line of true words on stderr: a server that was
never reached is not said to have rejected anything, and a stream that broke after a 200 is not labelled
with that 200."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from _cli_helpers import geppetto

from geppetto.simulator import Simulator

LABEL = {"openai-responses": "openai", "openai-chat": "openai_chat"}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("provider", ["openai-responses", "openai-chat"])
def test_an_unreachable_server_is_one_line_saying_so(tmp_path: Path, provider: str) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    out = geppetto(
        "run",
        "--provider",
        provider,
        "--base-url",
        url,
        "--model",
        "m",
        "hi",
        config_dir=tmp_path,
        OPENAI_API_KEY="sk-x",
    )
    assert out.returncode == 1
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"error: [{LABEL[provider]}] could not reach {url}/")
    assert lines[0].endswith("attempts); check the base URL and the network")
    assert "rejected" not in out.stderr
    assert ": :" not in out.stderr


@pytest.mark.parametrize("provider", ["openai-responses", "openai-chat"])
def test_a_broken_stream_is_one_line_without_the_200(tmp_path: Path, provider: str, geppetto_sim: Simulator) -> None:
    geppetto_sim.fail_next(drop_after=2)
    out = geppetto(
        "run",
        "--provider",
        provider,
        "--base-url",
        geppetto_sim.openai_url,
        "--model",
        "sim-1",
        "hi",
        config_dir=tmp_path,
        OPENAI_API_KEY="sk-x",
    )
    assert out.returncode == 1
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"error: [{LABEL[provider]}] the stream from {geppetto_sim.openai_url}/"), lines[0]
    assert " broke off after " in lines[0] or "ended" in lines[0], lines[0]
    message = lines[0].replace(geppetto_sim.openai_url, "")  # the port may hold the digits 200
    assert "200" not in message
