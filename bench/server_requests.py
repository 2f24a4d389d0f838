"""The server's CPU per request kind: one ``geppetto serve`` app (``create_app`` with an engine that answers at
once, a SQLite store) in a child process, driven over HTTP one request at a time; the child's CPU time
(user + system, from ``/proc``) over N requests of each kind, after 10 to warm up.

Kinds: a REST prompt (``POST /api/sessions/{id}/messages``, then its events until ``run_finished``, in one
session that grows), an AG-UI run (``POST /ag-ui``, a new thread each) and ``GET /api/sessions/{id}`` (the
grown session). The engine costs next to nothing, so the figures are the server's own: routing, checks,
store, bus.

Run: ``bench/.venv/bin/python bench/server_requests.py [N]`` (Linux; 200 by default). To compare two
commits, run it with ``PYTHONPATH=<a snapshot>/src`` (see docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, table
from long_sessions import serve_process


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _child_pid() -> int:
    """The one child process of this one (the server)."""
    pids = [
        int(pid)
        for task in os.listdir(f"/proc/{os.getpid()}/task")
        for pid in Path(f"/proc/{os.getpid()}/task/{task}/children").read_text().split()
    ]
    if len(pids) != 1:
        raise RuntimeError(f"expected one child process (the server), found {pids}")
    return pids[0]


async def _drive(url: str, n: int, pid: int) -> list[list[object]]:
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        session_id = (await client.post("/api/sessions", json={})).json()["id"]

        async def rest(i: int) -> None:
            posted = await client.post(f"/api/sessions/{session_id}/messages", json={"text": f"prompt {i}"})
            posted.raise_for_status()
            params = {"after": posted.json()["after"], "until": "finished"}
            async with client.stream("GET", f"/api/sessions/{session_id}/events", params=params) as events:
                async for _ in events.aiter_lines():
                    pass

        async def agui(i: int) -> None:
            run = {
                "threadId": f"thread-{i}",
                "runId": f"run-{i}",
                "messages": [{"id": "m", "role": "user", "content": "Hello"}],
                "state": None,
                "tools": [],
                "context": [],
                "forwardedProps": None,
            }
            async with client.stream("POST", "/ag-ui", json=run, headers={"accept": "text/event-stream"}) as events:
                events.raise_for_status()
                async for _ in events.aiter_lines():
                    pass

        async def get(i: int) -> None:
            (await client.get(f"/api/sessions/{session_id}")).raise_for_status()

        kinds: list[tuple[str, Callable[[int], Awaitable[None]]]] = [
            ("REST prompt + its events", rest),
            ("AG-UI run", agui),
            ("GET session", get),
        ]
        rows: list[list[object]] = []
        for name, one in kinds:
            for i in range(10):
                await one(i)
            cpu, wall = _cpu_seconds(pid), time.perf_counter()
            for i in range(10, 10 + n):
                await one(i)
            rows.append([name, n, (_cpu_seconds(pid) - cpu) / n * 1000, (time.perf_counter() - wall) / n * 1000])
        return rows


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as folder, serve_process(Path(folder) / "sessions.db") as url:
        rows = asyncio.run(_drive(url, n, _child_pid()))
    print(f"geppetto serve, one request at a time; {machine()}")
    print(table(["request", "count", "server CPU ms each", "wall ms each"], rows))
    print("SUMMARY server CPU ms per request: " + "; ".join(f"{r[0]} {float(r[2]):.2f}" for r in rows))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
