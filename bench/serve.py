"""`geppetto serve` under load: N concurrent sessions x P prompts through 2 worker processes, with the
in-process bus, Redis Streams and NATS JetStream side by side in one run (issue 17).

Each bus gets 2 fresh `geppetto serve` workers on one PostgreSQL store (a fresh schema; a SQLite file when
PostgreSQL is not reachable) against the scripted simulator in another process. A client session makes a
session, then for each prompt POSTs it to one worker and reads its events (`/events?until=finished`) from
the other worker: cross-worker on Redis and NATS; on the in-process bus a worker only sees its own events,
so there the client reads from the worker that took the prompt. Printed per bus: prompts/s, HTTP
requests/s, p50/p99 time from the POST to the first model event (the first event after `run_started`)
and to `run_finished`, peak RSS of each worker, and errors (any non-2xx, any inference not `completed`).

Run: `.venv/bin/python bench/serve.py [--sessions 500] [--prompts 3] [--buses memory,redis,nats]`

`--agui` measures `POST /ag-ui` instead: SESSIONS concurrent clients each make PROMPTS runs, each on a new
thread with one user message, against one `geppetto serve` worker (in-process bus, a SQLite store) and,
side by side, pydantic-ai's AG-UI adapter (`AGUIAdapter.dispatch_request` on a Starlette route under uvicorn, in the bench venv) on the same
simulator. Printed per server: p50/p99 time from the POST to the first event and to `RUN_FINISHED`.
Run: `bench/.venv/bin/python bench/serve.py --agui [--sessions 20] [--prompts 10]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from _common import machine, percentile, simulator_process, table

POSTGRES = os.environ.get("GEPPETTO_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
BUSES = {"memory": "memory://", "redis": "redis://127.0.0.1:6379/14", "nats": "nats://127.0.0.1:4222"}


SERVE = [sys.executable, "-m", "geppetto", "serve", "--profile", "bench"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _store(folder: Path) -> tuple[str, Any]:
    """A PostgreSQL URL on a fresh schema (and how to drop it), or a SQLite file."""
    try:
        import psycopg

        schema = f"geppetto_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(POSTGRES, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")

        def drop() -> None:
            with psycopg.connect(POSTGRES, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")

        return f"{POSTGRES}?options=-csearch_path%3D{schema}", drop
    except Exception as exc:
        print(f"PostgreSQL not reachable ({exc}); using SQLite", file=sys.stderr)
        return str(folder / "sessions.db"), lambda: None


class Worker:
    def __init__(self, env: dict[str, str], store: str, bus: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [*SERVE, "--port", str(self.port), "--store", store, "--bus", bus],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 120  # imports are slow on a busy machine
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited: {self.proc.stderr.read() if self.proc.stderr else ''}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("worker did not start in 120 s")

    def cpu_seconds(self) -> float:
        """The CPU time (user + system) the server process has used so far (Linux)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


async def _client(
    client: httpx.AsyncClient, a: str, b: str, prompts: int, stats: dict[str, Any], sem: asyncio.Semaphore
) -> None:
    try:
        await _session(client, a, b, prompts, stats, sem)
    except httpx.HTTPError as exc:
        stats["errors"].append(f"{type(exc).__name__}: {exc}")


async def _session(
    client: httpx.AsyncClient, a: str, b: str, prompts: int, stats: dict[str, Any], sem: asyncio.Semaphore
) -> None:
    async with sem:
        response = await client.post(f"{a}/api/sessions", json={})
        stats["requests"] += 1
        if response.status_code != 201:
            stats["errors"].append(f"create {response.status_code}")
            return
        sid = response.json()["id"]
        for i in range(prompts):
            sent = time.perf_counter()
            response = await client.post(f"{a}/api/sessions/{sid}/messages", json={"text": f"Hello number {i}"})
            stats["requests"] += 1
            if response.status_code != 202:
                stats["errors"].append(f"prompt {response.status_code}: {response.text[:200]}")
                return
            after = response.json()["after"]
            first, status = None, None
            async with client.stream(
                "GET", f"{b}/api/sessions/{sid}/events", params={"after": after, "until": "finished"}
            ) as stream:
                stats["requests"] += 1
                async for line in stream.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    event = json.loads(line[6:])
                    if first is None and event["type"] != "run_started":
                        first = time.perf_counter() - sent
                    if event["type"] == "run_finished":
                        status = event["status"]
            done = time.perf_counter() - sent
            if status != "completed":
                stats["errors"].append(f"inference {status}")
                return
            stats["first"].append(first if first is not None else done)
            stats["done"].append(done)
            stats["prompts"] += 1


async def _load(a: str, b: str, sessions: int, prompts: int) -> dict[str, Any]:
    stats: dict[str, Any] = {"requests": 0, "prompts": 0, "errors": [], "first": [], "done": []}
    limits = httpx.Limits(max_connections=2 * sessions + 10, max_keepalive_connections=2 * sessions)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        sem = asyncio.Semaphore(sessions)
        start = time.perf_counter()
        await asyncio.gather(*(_client(client, a, b, prompts, stats, sem) for _ in range(sessions)))
        stats["elapsed"] = time.perf_counter() - start
    return stats


def run_bus(kind: str, sim_url: str, sessions: int, prompts: int) -> list[Any]:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config"
        config.mkdir()
        (config / "profiles.yaml").write_text(
            "profiles:\n  bench:\n    provider: openai-responses\n    model: sim-1\n"
            f"    base_url: {sim_url}\n    simulator: true\n    mode: chained\n"
        )
        env = {**os.environ, "GEPPETTO_CONFIG_DIR": str(config), "GEPPETTO_DATA_DIR": str(Path(tmp) / "data")}
        store, drop = _store(Path(tmp))
        workers = [Worker(env, store, BUSES[kind]) for _ in range(2)]
        try:
            for w in workers:
                w.wait_ready()
            a, b = workers[0].url, workers[1].url
            stats = asyncio.run(_load(a, a if kind == "memory" else b, sessions, prompts))
            rss = [w.peak_rss_mb() for w in workers]
        finally:
            for w in workers:
                w.stop()
            drop()
    ms = 1000.0
    return [
        kind,
        "same worker" if kind == "memory" else "other worker",
        stats["prompts"] / stats["elapsed"],
        stats["requests"] / stats["elapsed"],
        percentile(stats["first"], 0.5) * ms,
        percentile(stats["first"], 0.99) * ms,
        percentile(stats["done"], 0.5) * ms,
        percentile(stats["done"], 0.99) * ms,
        " / ".join(f"{r:.0f}" for r in rss),
        len(stats["errors"]),
        stats["errors"][:3],
    ]


# -- AG-UI -------------------------------------------------------------------------------------
def _pydantic_ai_agui(port: int, sim_url: str) -> None:
    """pydantic-ai's AG-UI adapter (``AGUIAdapter.dispatch_request`` on a Starlette route) over the
    simulator, served on ``port`` (a child process)."""
    import uvicorn
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    model = OpenAIResponsesModel("sim-1", provider=OpenAIProvider(base_url=sim_url, api_key="sk-test"))
    agent: Agent[None, str] = Agent(model)

    async def run(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    app = Starlette(routes=[Route("/", run, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


class Child(Worker):
    """A server this script runs as a child process (``--agui-child PORT SIM_URL``): pydantic-ai's adapter."""

    def __init__(self, sim_url: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--agui-child", str(self.port), sim_url],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )


async def _agui_client(client: httpx.AsyncClient, url: str, prompts: int, stats: dict[str, Any]) -> None:
    for i in range(prompts):
        body = {
            "threadId": uuid.uuid4().hex,
            "runId": uuid.uuid4().hex,
            "state": {},
            "messages": [{"id": uuid.uuid4().hex, "role": "user", "content": f"Hello number {i}"}],
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
        sent, first, finished = time.perf_counter(), None, False
        try:
            async with client.stream("POST", url, json=body, headers={"accept": "text/event-stream"}) as stream:
                if stream.status_code != 200:
                    stats["errors"].append(f"status {stream.status_code}")
                    continue
                async for line in stream.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    if first is None:
                        first = time.perf_counter() - sent
                    if json.loads(line[5:])["type"] == "RUN_FINISHED":
                        finished = True
        except httpx.HTTPError as exc:
            stats["errors"].append(f"{type(exc).__name__}: {exc}")
            continue
        if not finished or first is None:
            stats["errors"].append("no RUN_FINISHED")
            continue
        stats["first"].append(first)
        stats["done"].append(time.perf_counter() - sent)


async def _agui_load(url: str, sessions: int, prompts: int) -> dict[str, Any]:
    stats: dict[str, Any] = {"errors": [], "first": [], "done": []}
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=sessions + 10)) as client:
        await _agui_client(client, url, 1, {"errors": [], "first": [], "done": []})  # warm-up
        await asyncio.gather(*(_agui_client(client, url, prompts, stats) for _ in range(sessions)))
    return stats


def run_agui(sim_url: str, sessions: int, prompts: int) -> list[list[Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config"
        config.mkdir()
        (config / "profiles.yaml").write_text(
            "profiles:\n  bench:\n    provider: openai-responses\n    model: sim-1\n"
            f"    base_url: {sim_url}\n    simulator: true\n    mode: chained\n"
        )
        env = {**os.environ, "GEPPETTO_CONFIG_DIR": str(config), "GEPPETTO_DATA_DIR": str(Path(tmp) / "data")}
        servers: list[tuple[str, Worker, str]] = [
            ("geppetto serve", Worker(env, str(Path(tmp) / "sessions.db"), BUSES["memory"]), "/ag-ui")
        ]
        try:
            import pydantic_ai  # noqa: F401

            servers.append(("pydantic-ai AGUIAdapter", Child(sim_url), "/"))
        except ImportError:
            print("pydantic-ai: skipped (not installed; run `sh bench/setup.sh`)", file=sys.stderr)
        try:
            for name, server, path in servers:
                server.wait_ready() if path == "/ag-ui" else _wait_listening(server)
                cpu = server.cpu_seconds()
                stats = asyncio.run(_agui_load(server.url + path, sessions, prompts))
                cpu = server.cpu_seconds() - cpu
                ms = 1000.0
                rows.append(
                    [
                        name,
                        len(stats["first"]),
                        percentile(stats["first"], 0.5) * ms,
                        percentile(stats["first"], 0.99) * ms,
                        percentile(stats["done"], 0.5) * ms,
                        percentile(stats["done"], 0.99) * ms,
                        cpu * ms / max(len(stats["done"]), 1),
                        len(stats["errors"]),
                        stats["errors"][:3],
                    ]
                )
        finally:
            for _, server, _ in servers:
                server.stop()
    return rows


def _wait_listening(server: Worker) -> None:
    """Wait until ``server`` accepts connections (pydantic-ai's app has no health route)."""
    deadline = time.monotonic() + 120  # imports are slow on a busy machine
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"server exited: {server.proc.stderr.read() if server.proc.stderr else ''}")
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("server did not start in 120 s")


def main_agui(sessions: int, prompts: int) -> None:
    with simulator_process(1) as sim_url:
        rows = run_agui(sim_url, sessions, prompts)
    print(f"AG-UI: {sessions} concurrent clients x {prompts} runs, a new thread each; {machine()}")
    headers = ["server", "runs", "first event p50 ms", "p99 ms", "RUN_FINISHED p50 ms", "p99 ms"]
    headers += ["server CPU ms per run", "errors"]
    print(table([*headers, "first errors"], rows))
    print("SUMMARY " + "; ".join(f"{r[0]}: first event p50 {r[2]:.1f} ms" for r in rows))


def main() -> None:
    if sys.argv[1:2] == ["--agui-child"]:
        _pydantic_ai_agui(int(sys.argv[2]), sys.argv[3])
        return
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # ~2 sockets per session here and in each worker
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--buses", default="memory,redis,nats")
    parser.add_argument("--agui", action="store_true", help="time POST /ag-ui against pydantic-ai's AG-UI adapter")
    args = parser.parse_args()
    if args.agui:
        main_agui(args.sessions, args.prompts)
        return
    rows = []
    with simulator_process(1) as sim_url:
        for kind in args.buses.split(","):
            rows.append(run_bus(kind, sim_url, args.sessions, args.prompts))
            print(f"{kind}: done", file=sys.stderr, flush=True)
    print(f"{args.sessions} concurrent sessions x {args.prompts} prompts, 2 workers; {machine()}")
    headers = ["bus", "events read from", "prompts/s", "requests/s", "first event p50 ms", "p99 ms"]
    headers += ["finished p50 ms", "p99 ms", "peak RSS MB (A / B)", "errors", "first errors"]
    print(table(headers, rows))
    print(
        "SUMMARY "
        + "; ".join(f"{r[0]}: {r[2]:.1f} prompts/s, first event p50 {r[5]:.1f} ms, {r[9]} errors" for r in rows)
    )


if __name__ == "__main__":
    main()
