"""The ``geppetto serve`` command: refusals before anything listens, uvicorn's several workers, and an
``import geppetto`` that loads no server, broker or protocol package."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from server_support import Worker, bus_url, sse_events, write_sim_profile

from geppetto.simulator import Simulator


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "geppetto", "serve", *args], capture_output=True, text=True, timeout=60
    )


def test_a_public_address_needs_an_api_key() -> None:
    done = serve("--profile", "sim", "--host", "0.0.0.0", "--port", "0")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --host 0.0.0.0 is reachable from other machines")
    assert "--api-key or GEPPETTO_SERVER_KEY" in done.stderr


def test_several_workers_need_a_shared_bus() -> None:
    done = serve("--profile", "sim", "--workers", "2")
    assert done.returncode == 2
    assert "needs a bus the workers share" in done.stderr and "--bus redis://" in done.stderr


def test_an_unknown_profile_or_bus_is_refused_before_listening() -> None:
    done = serve("--profile", "nope")
    assert done.returncode == 2 and "no profile named 'nope'" in done.stderr
    done = serve("--profile", "sim", "--bus", "kafka://x")
    assert done.returncode == 2 and "unknown event bus" in done.stderr


def test_uvicorn_workers_share_the_port_and_the_session(
    geppetto_sim: Simulator, postgres_target: str, tmp_path: object
) -> None:
    write_sim_profile(geppetto_sim)
    worker = Worker("--profile", "simtest", "--workers", "2", "--store", postgres_target, "--bus", bus_url("redis"))
    try:
        names = {httpx.get(worker.url + "/healthz").json()["worker"] for _ in range(40)}
        assert len(names) >= 1
        sid = httpx.post(worker.url + "/api/sessions", json={}).json()["id"]
        for text in ("Hello", "Again"):
            started = httpx.post(f"{worker.url}/api/sessions/{sid}/messages", json={"text": text}).json()
            with httpx.stream(
                "GET",
                f"{worker.url}/api/sessions/{sid}/events",
                params={"after": started["after"], "until": "finished"},
                timeout=60,
            ) as response:
                last = list(sse_events(response.iter_lines()))[-1]
            assert last["data"]["status"] == "completed"
    finally:
        worker.stop()


def test_import_geppetto_loads_no_server_broker_or_protocol_package() -> None:
    code = (
        "import sys, geppetto, geppetto.session.stores, geppetto.events.bus\n"
        "heavy = ('geppetto.server', 'starlette', 'uvicorn', 'redis', 'nats', 'ag_ui', 'psycopg')\n"
        "print(sorted({m.split('.')[0] if not m.startswith('geppetto') else m for m in sys.modules "
        "if m.startswith(heavy)}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_log_flags_are_checked_before_listening() -> None:
    done = serve("--profile", "sim", "--log-format", "xml")
    assert done.returncode == 2 and "--log-format 'xml': use text or json" in done.stderr
    done = serve("--profile", "sim", "--log-level", "loud")
    assert done.returncode == 2 and "--log-level 'loud': use one of debug, info, warning, error" in done.stderr


def test_a_bus_that_is_down_is_logged_as_json_lines_and_counted() -> None:
    pytest.importorskip("prometheus_client")
    with socket.socket() as s:  # a port nothing listens on: the broker is down
        s.bind(("127.0.0.1", 0))
        down = f"redis://127.0.0.1:{s.getsockname()[1]}/0"
    worker = Worker("--profile", "sim", "--bus", down, "--log-format", "json")
    try:
        sid = httpx.post(worker.url + "/api/sessions", json={}).json()["id"]
        refused = httpx.post(f"{worker.url}/api/sessions/{sid}/messages", json={"text": "Hello"})
        assert refused.status_code == 503 and refused.json()["error"]["type"] == "unavailable"
        metrics = httpx.get(worker.url + "/metrics")
        assert metrics.status_code == 200
        assert re.search(r'^geppetto_server_control_failures_total\{bus="redis"\} [1-9]', metrics.text, re.M)
    finally:
        output = worker.stop()
    records = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert records, f"no JSON log line in:\n{output}"
    assert all({"time", "level", "logger", "worker", "message"} <= set(r) for r in records)
    control = [r for r in records if "control topic" in r["message"]]
    assert control and control[0]["level"] == "warning" and "check that Redis runs there" in control[0]["message"]
    failed = [r for r in records if r["message"].startswith(f"request POST /api/sessions/{sid}/messages failed:")]
    assert failed and failed[0]["level"] == "warning" and "check that Redis runs there" in failed[0]["message"]


def test_chat_continue_resumes_a_served_session_on_the_server_profile(tmp_path: object) -> None:
    """A session made in the web chat (``serve --profile sim``) continued with ``geppetto chat --continue``
    runs on the profile the server ran it on, not on the file's default (which once failed for want of its key)."""
    folder = Path(os.environ["GEPPETTO_CONFIG_DIR"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "profiles.yaml").write_text(
        "default: work\nprofiles:\n  work:\n    provider: openai-responses\n    model: gpt-4.1-mini\n"
        "    api_key_env: WORK_KEY_NOT_SET\n"
    )
    worker = Worker("--profile", "sim")
    try:
        sid = httpx.post(worker.url + "/api/sessions", json={}).json()["id"]
        started = httpx.post(f"{worker.url}/api/sessions/{sid}/messages", json={"text": "Hi from the web"}).json()
        with httpx.stream(
            "GET",
            f"{worker.url}/api/sessions/{sid}/events",
            params={"after": started["after"], "until": "finished"},
            timeout=60,
        ) as response:
            assert list(sse_events(response.iter_lines()))[-1]["data"]["status"] == "completed"
    finally:
        worker.stop()
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "WORK_KEY_NOT_SET")}
    done = subprocess.run(
        [sys.executable, "-m", "geppetto", "chat", "--continue"],
        input="And again\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "NO_COLOR": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert f"continuing session {sid}" in done.stdout
    assert "geppetto chat · sim ·" in done.stdout
    assert "You said: And again" in done.stdout
