"""Brokers of a test's own: ``redis-server`` or ``nats-server`` on a free loopback port, with their data in a
folder kept across restarts, so a test can kill one and start it again (never the machine's shared
brokers on 6379/4222)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

BINARIES = {"redis": "redis-server", "nats": "nats-server"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    """One broker process; ``url`` stays the same across :meth:`kill` and :meth:`start`."""

    def __init__(self, kind: str, folder: Path) -> None:
        binary = shutil.which(BINARIES[kind]) or shutil.which(BINARIES[kind], path="/usr/sbin:/usr/bin")
        if binary is None:
            pytest.skip(f"{BINARIES[kind]} is not installed; these fault tests start brokers of their own")
        self.kind, self.binary, self.folder = kind, binary, folder
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        if kind == "redis":
            # Appended to a file on every write, so a restart keeps the streams (as a deployment's Redis should).
            self.url = f"redis://127.0.0.1:{self.port}/0"
            self.args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(folder)]
            self.args += ["--save", "", "--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no"]
        else:
            self.url = f"nats://127.0.0.1:{self.port}"
            self.args = [binary, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(folder)]

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.kill()
                    raise AssertionError(f"{self.binary} did not listen on port {self.port}") from None
                time.sleep(0.05)

    def kill(self) -> None:
        """Stop it at once (SIGKILL), as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None
