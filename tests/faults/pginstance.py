"""A PostgreSQL server of the test's own (initdb + pg_ctl) on a free loopback port, to stop and restart
while a store uses it; never the machine's shared server. Run as the ``postgres`` user when the tests
run as root (the server refuses to run as root)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

PG_BIN = Path(os.environ.get("GEPPETTO_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresInstance:
    """``start()``, ``stop(mode)``, ``restart()``; ``url`` names its database ``postgres`` (trust auth)."""

    def __init__(self) -> None:
        for tool in ("initdb", "pg_ctl", "postgres"):
            if not (PG_BIN / tool).is_file():
                pytest.skip(
                    f"PostgreSQL server binaries are not in {PG_BIN} ({tool} is missing); set GEPPETTO_TEST_PG_BIN"
                )
        self.user: str | None = None
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                pytest.skip("running as root without runuser: cannot start a PostgreSQL server as another user")
            self.user = "postgres"
        self.root = Path(tempfile.mkdtemp(prefix="geppetto-pg-"))
        if self.user is not None:
            shutil.chown(self.root, self.user)
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._run(str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    def _run(self, *args: str, timeout: float = 60) -> None:
        command = ["runuser", "-u", self.user, "--", *args] if self.user else list(args)
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off"
        self._run(
            str(PG_BIN / "pg_ctl"), "start", "-w", "-t", "30", "-D", str(self.data), "-l", str(self.log), "-o", options
        )

    def stop(self, mode: str = "immediate") -> None:
        """``immediate`` is a crash as far as clients see: every connection dropped, no goodbye."""
        self._run(str(PG_BIN / "pg_ctl"), "stop", "-w", "-t", "30", "-m", mode, "-D", str(self.data))

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
