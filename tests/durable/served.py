"""``geppetto serve --temporal`` (or ``python -m geppetto.server --temporal``) in a subprocess on loopback, one
worker, the in-process bus, its engine the test's simulator."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SRC = Path(__file__).parent.parent.parent / "src"
BOUND = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, what: str, proc: subprocess.Popen[bytes], bound: float = 60.0) -> None:
    deadline = time.monotonic() + bound
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{what} did not listen on {port}") from None
            time.sleep(0.1)


@contextlib.contextmanager
def served(
    temporal_address: str, openai_url: str, tmp_path: Path, *, entry: tuple[str, ...] = ("geppetto", "serve")
) -> Iterator[tuple[Any, str, list[bytes]]]:
    """An httpx client of the server, its task queue, and (once the block ends) its stderr in the list."""
    import httpx

    port, queue = free_port(), f"q-{uuid.uuid4()}"
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "GEPPETTO_CONFIG_DIR": str(tmp_path), "GEPPETTO_DATA_DIR": str(tmp_path)}  # fmt: skip
    args = [sys.executable, "-m", *entry, "--profile", "sim", "--base-url", openai_url, "--with-tools",
            "--store", str(tmp_path / "sessions.db"), "--port", str(port), "--sweep-interval", "0",
            "--temporal", temporal_address, "--task-queue", queue]  # fmt: skip
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err: list[bytes] = []
    try:
        wait_listening(port, " ".join(entry), proc, 90)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=BOUND) as client:
            yield client, queue, err
    finally:
        proc.terminate()
        try:
            _out, stderr = proc.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            _out, stderr = proc.communicate()
        err.append(stderr)


def events(client: Any, path: str, until: str = "run_finished") -> list[dict[str, Any]]:
    """The SSE events at ``path`` up to the first ``until``."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "server"))
    from server_support import sse_events

    out: list[dict[str, Any]] = []
    with client.stream("GET", path, timeout=BOUND) as response:
        assert response.status_code == 200, response.read()
        for event in sse_events(response.iter_lines()):
            out.append(event)
            if event.get("event") == until:
                break
    return out
