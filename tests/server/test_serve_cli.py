"""The ``geppetto serve`` command: refusals before anything listens, uvicorn's several workers, and an
``import geppetto`` that loads no server, broker or protocol package."""

from __future__ import annotations

import subprocess
import sys

import httpx
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
