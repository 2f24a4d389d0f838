"""``geppetto serve`` as a new user starts it: a port already taken is one line naming ``--port``, and
``--profile sim`` with several workers runs one simulator they all talk to, so no chain is lost."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from server_support import Worker, bus_url, sse_events


def test_a_port_in_use_is_one_line_naming_the_flag() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "geppetto", "serve", "--profile", "sim", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert (done.returncode, done.stdout) == (2, "")  # nothing claims to be serving
    assert done.stderr == (
        f"error: port {port} on 127.0.0.1 is already in use; pick another with --port (0 picks a free one)\n"
    )


def _ask(url: str, sid: str, text: str) -> dict[str, Any]:
    started = httpx.post(f"{url}/api/sessions/{sid}/messages", json={"text": text}, timeout=30).json()
    with httpx.stream(
        "GET", f"{url}/api/sessions/{sid}/events", params={"after": started["after"], "until": "finished"}, timeout=60
    ) as response:
        return list(sse_events(response.iter_lines()))[-1]


def test_workers_of_the_sim_profile_share_one_simulator(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    worker = Worker("--profile", "sim", "--workers", "2", "--store", store, "--bus", bus_url("redis"))
    try:
        sid = httpx.post(worker.url + "/api/sessions", json={}).json()["id"]
        for i in range(8):
            last = _ask(worker.url, sid, f"Prompt {i}")
            assert last["data"]["status"] == "completed", last
        report = httpx.get(f"{worker.url}/api/sessions/{sid}/inspect", timeout=30).json()
    finally:
        output = worker.stop()
    requests = report["requests"]
    assert len(requests) == 8, output
    assert [r["fallback"] for r in requests] == [None] * 8, output  # every prompt after the first chained
    assert all(r["previous_response_id"] for r in requests[1:]), requests
