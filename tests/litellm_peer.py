"""A real third-party Responses server in front of the simulator: the LiteLLM proxy, run as a subprocess
(the ``litellm_proxy`` fixture of tests/conftest.py).

The proxy lives in a virtual environment of its own (``make setup`` makes ``.venv/litellm`` from
``tests/requirements-litellm.txt``): its proxy extra pins packages below geppetto's. It is found, in
order, at ``$GEPPETTO_LITELLM`` (the ``litellm`` executable), in ``litellm/`` inside the environment running
the tests, next to this interpreter, or on the PATH; the tests skip, naming the install command, where
there is none. It runs offline: no database, no telemetry, the bundled model cost map, a bounded wait for
it to start, its process group killed at the end.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from geppetto.simulator import Simulator

STARTUP_SECONDS = 240.0
"""How long the proxy may take to answer its liveness check (it imports a great deal: a minute on two busy cores)."""

MODEL = "sim-1"
"""The model name the proxy serves, routed to the simulator's Responses API under the same name."""

BRIDGE_MODEL = "sim-1-bridge"
"""The same simulator model through the proxy's Responses-to-Chat bridge (``custom_openai/``: the proxy turns
``/v1/responses`` into ``/v1/chat/completions``); without a database it has no history to chain on."""


def litellm_executable() -> str | None:
    """The ``litellm`` command to run, or None when none is installed."""
    given = os.environ.get("GEPPETTO_LITELLM")
    if given:
        return given
    for candidate in (Path(sys.prefix) / "litellm" / "bin" / "litellm", Path(sys.executable).parent / "litellm"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("litellm")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def upstream_response(sim: Simulator, item_id: str, timeout: float = 5.0) -> str:
    """The simulator's id of the response that produced the output item ``item_id``. The proxy answers with
    response ids of its own (opaque tokens it maps back when they return as ``previous_response_id``), but
    passes output item ids through, so an item of the answer names the response the simulator made. (The
    simulator stores a streamed response after its last frame, which the client may read first: wait.)"""
    deadline = time.monotonic() + timeout
    while True:
        with sim.state.lock:
            for rid, stored in sim.state.responses.items():
                if any(item.get("id") == item_id for item in stored.output):
                    return rid
        if time.monotonic() > deadline:
            raise KeyError(f"no response stored in the simulator produced the item {item_id!r}")
        time.sleep(0.005)


@dataclass
class Proxy:
    """A running LiteLLM proxy in front of ``sim``: ``url`` is its root (``url + "/v1"`` the base URL)."""

    url: str
    sim: Simulator
    log: Path
    key: str
    """The proxy's master key (it refuses to start without one): the key its clients send."""

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _config(sim: Simulator, master_key: str) -> str:
    # the openai provider with the simulator as its api_base: LiteLLM sends /v1/responses on as a
    # Responses API request (its native path for this provider); custom_openai/ goes through its bridge
    return f"""\
model_list:
  - model_name: {MODEL}
    litellm_params:
      model: openai/{MODEL}
      api_base: {sim.openai_url}
      api_key: sk-upstream
  - model_name: {BRIDGE_MODEL}
    litellm_params:
      model: custom_openai/{MODEL}
      api_base: {sim.openai_url}
      api_key: sk-upstream
litellm_settings:
  telemetry: false
  drop_params: false
  num_retries: 0
  request_timeout: 60
general_settings:
  master_key: {master_key}
  disable_spend_logs: true
"""


def _offline_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LITELLM_", "DATABASE_"))}
    env.pop("PYTHONPATH", None)  # its own environment, not geppetto's source tree
    env.update(
        HOME=str(home),
        LITELLM_LOCAL_MODEL_COST_MAP="True",  # the bundled prices, no download at start
        LITELLM_TELEMETRY="False",
        LITELLM_LOG="WARNING",
        DISABLE_ADMIN_UI="True",
        NO_DOCS="True",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONUNBUFFERED="1",
        NO_PROXY="127.0.0.1,localhost",
    )
    return env


def _die_with_parent() -> None:
    """In the child, before it runs the proxy: Linux sends it SIGTERM when the test process dies without
    stopping it (killed, say), so no proxy outlives the tests. Elsewhere nothing is done."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _wait_until_live(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            raise RuntimeError(f"the LiteLLM proxy exited with {process.returncode} while starting:\n{tail}")
        try:
            if httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
    raise RuntimeError(f"the LiteLLM proxy did not answer within {STARTUP_SECONDS:.0f} s:\n{tail}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


@contextmanager
def run_litellm(sim: Simulator, folder: Path) -> Iterator[Proxy]:
    """The LiteLLM proxy on a free loopback port in front of ``sim``, stopped (its process group) on exit;
    skips the test when no ``litellm`` is installed."""
    command = litellm_executable()
    if command is None:
        pytest.skip(
            "the LiteLLM proxy is not installed: run `make setup` (it installs tests/requirements-litellm.txt "
            "into .venv/litellm), or set GEPPETTO_LITELLM to a litellm executable"
        )
    config = folder / "litellm.yaml"
    key = f"sk-{secrets.token_hex(32)}"
    config.write_text(_config(sim, key))
    log = folder / "litellm.log"
    port = _free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [command, "--config", str(config), "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=_offline_env(folder),
            cwd=folder,
            start_new_session=True,  # its own process group: the workers it starts stop with it
            preexec_fn=_die_with_parent,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_live(url, process, log)
        yield Proxy(url, sim, log, key)
    finally:
        _stop(process)
