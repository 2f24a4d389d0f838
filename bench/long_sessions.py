"""Long sessions (issue 29): N prompts in one session, one answer block each, from an engine that answers at
once, so every figure is the cost of keeping the conversation, not of the model.

Backends, side by side in one run:

- ``sqlite``: ``Session(engine, store=open_store(path))`` and ``await session.run(text)`` per prompt;
- ``postgres``: the same on ``open_store(url)`` in a fresh schema (``GEPPETTO_BENCH_POSTGRES_URL``, default
  the local database ``test``; skipped with the reason when it does not answer);
- ``serve``: ``geppetto serve`` (``create_app`` with the same engine, a SQLite store) in a child process,
  one session over REST: ``POST /api/sessions/{id}/messages``, then its events until ``run_finished``;
- ``agents``: openai-agents' ``SQLiteSession`` holding the same conversation, each prompt as its
  ``Runner`` does with a session: read the history (``get_items``), then add the user and assistant items
  (only in the bench venv; skipped when openai-agents is not installed).

Per backend and size: time per prompt (median of the first 10 and of the last 10, and their ratio; for
``serve`` also prompts 10-19 against 1,991-2,000; beside them, this process's CPU time per prompt, median of
the first and of the last 100, which a busy machine moves less than wall time; and for ``sqlite`` and
``postgres`` the *mean* CPU per prompt of the last 100 against the mean of prompts 11-110 of a fresh session
in a child process of its own, run prompt for prompt alternately with them, so the garbage collector's
rare full passes over what a long session holds are counted), bytes on disk (the SQLite file with its WAL; PostgreSQL:
``pg_total_relation_size`` of the schema's tables), restore time (``await Session.restore(engine, store,
id)``; agents: a new ``SQLiteSession`` and ``get_items()``; for geppetto also "warm": on a newly opened
store while this process still holds the long session), the memory the restored session holds
(tracemalloc, from before the restore to after it, with the session alive) and the JSON of the final Turn
(``turn_to_dict``; agents: its items), against which bytes on disk and memory are compared. The targets of
issue 29 are printed beside the figures.

Each size of each backend stops by itself once it has run ``--budget`` seconds from its first prompt (the
prompts so far are reported and the size is marked aborted); restore and memory are measured only for a
size that finished, memory only when a traced restore fits in what is left of the budget.

Run: ``bench/.venv/bin/python bench/long_sessions.py [--sizes 100,1000,10000] [--backends
sqlite,postgres,serve,agents] [--serve-sizes N,...] [--budget 300]`` (``.venv/bin/python`` runs all
but ``agents``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, median, table

from geppetto import Block, Session, Turn
from geppetto.session.stores import open_store
from geppetto.turns import turn_to_dict

POSTGRES_URL = os.environ.get("GEPPETTO_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
BACKENDS = ("sqlite", "postgres", "serve", "agents")
WINDOW = 10
"""Prompts averaged at each end of a run."""
CPU_WINDOW = 100
"""Prompts whose CPU time is compared at each end of a run."""
SERVE_EARLY, SERVE_LATE = 10, 2000
"""Issue 29: serve latency flat within 2x from the 10th to the 2,000th prompt."""
TARGET_GROWTH, TARGET_DISK, TARGET_RESTORE, TARGET_MEMORY, TARGET_SERVE = 1.5, 3.0, 1.0, 20.0, 2.0


def prompt_text(i: int) -> str:
    return f"Prompt {i}: what comes next in the story?"


def answer_text(i: int) -> str:
    return f"Answer {i}: the next chapter."


class Answer:
    """An engine that answers at once: one ``llm_text`` block per call."""

    async def run_inference(self, turn: Turn) -> Turn:
        turn.append(Block.llm_text(answer_text(len(turn.blocks) // 2)))
        return turn


@dataclass
class Result:
    backend: str
    size: int
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    fresh_cpu: list[float] = field(default_factory=list)
    note: str = ""
    warm_restore: float | None = None
    warm_restore_cpu: float | None = None
    disk: int | None = None
    final_json: int | None = None
    restore: float | None = None
    memory: int | None = None
    get_session: int | None = None

    @property
    def aborted(self) -> bool:
        return len(self.times) < self.size

    def window(self, first: int, last: int) -> float | None:
        """Median time of prompts ``first``..``last`` (1-based, inclusive), None when they were not all run
        (the median, so that one prompt slowed by the machine, or the first one opening the store, does
        not stand for its window)."""
        if first < 1 or last > len(self.times):
            return None
        return median(self.times[first - 1 : last])

    def cpu_ratio(self) -> str:
        """This process's CPU time per prompt (all its threads), median of the last ``CPU_WINDOW`` prompts
        against the first: steadier than wall time on a shared machine (not for ``serve``, whose work is
        in the server's process)."""
        if self.backend == "serve" or len(self.cpu) < 2 * CPU_WINDOW:
            return "-"
        first, last = median(self.cpu[:CPU_WINDOW]), median(self.cpu[-CPU_WINDOW:])
        return f"{first * 1e3:.2f} / {last * 1e3:.2f} ({last / first:.2f}x)" if first else "-"

    def mean_ratio(self) -> float | None:
        """Mean CPU per prompt of the last ``CPU_WINDOW`` prompts against the mean of a fresh session's
        prompts 11-110 run alternately with them (means: the collector's rare full passes count)."""
        if not self.fresh_cpu or len(self.cpu) < len(self.fresh_cpu):
            return None
        last = self.cpu[-len(self.fresh_cpu) :]
        fresh = sum(self.fresh_cpu) / len(self.fresh_cpu)
        return (sum(last) / len(last)) / fresh if fresh else None

    def mean_cell(self) -> str:
        ratio = self.mean_ratio()
        if ratio is None:
            return "-"
        n = len(self.fresh_cpu)
        last, fresh = sum(self.cpu[-n:]) / n, sum(self.fresh_cpu) / n
        return f"{last * 1e3:.2f} / {fresh * 1e3:.2f} ({ratio:.2f}x)"

    def early(self) -> float | None:
        return self.window(1, WINDOW)

    def late(self) -> float | None:
        return self.window(len(self.times) - WINDOW + 1, len(self.times))


class Budget:
    def __init__(self, seconds: float) -> None:
        self.seconds, self.start = seconds, time.monotonic()

    def spent(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.seconds - self.spent()


async def run_prompts(
    result: Result, budget: Budget, one: Callable[[int], Awaitable[None]], fresh: FreshSession | None = None
) -> None:
    """Run ``one(i)`` for each prompt, timing each, until the size is reached or the budget spent (counted
    from the first prompt: imports and a server's start are not the session's cost). With ``fresh``, the
    last ``CPU_WINDOW`` prompts alternate with prompts 11-110 of a fresh session in another process."""
    budget.start = time.monotonic()
    tail = min(CPU_WINDOW, result.size // 2) if fresh is not None else 0
    for i in range(1, result.size + 1):
        if fresh is not None and i == result.size - tail + 1:
            fresh.warm_up()
        start, cpu = time.perf_counter(), time.process_time()
        await one(i)
        result.times.append(time.perf_counter() - start)
        result.cpu.append(time.process_time() - cpu)
        if fresh is not None and i > result.size - tail:
            result.fresh_cpu.append(fresh.prompt())
        if budget.left() < 0 and i < result.size:
            result.note = f"aborted after {i} prompts: over the {budget.seconds:.0f} s budget"
            result.fresh_cpu.clear()
            return


FRESH_WARM_UP = 10
"""Prompts of the fresh session run before it is timed (its prompts 11-110 are compared)."""


class FreshSession:
    """A fresh session on a store of its own in a child process (its own heap and collector, as a new
    process's session has), one prompt per request: what a long session's last prompts are compared with,
    prompt for prompt, in the same run."""

    def __init__(self, target: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--fresh-child", target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.i = 0

    def prompt(self) -> float:
        """Run the fresh session's next prompt; its CPU seconds (the child's process time)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.i += 1
        self.proc.stdin.write(f"{self.i}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the fresh session's process exited")
        return float(line)

    def warm_up(self) -> None:
        while self.i < FRESH_WARM_UP:
            self.prompt()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(60)


def _fresh_child(target: str) -> None:
    """The child of :class:`FreshSession`: one prompt per line read, its CPU seconds written back."""

    async def go() -> None:
        with contextlib.closing(open_store(target)) as store:
            session = Session(Answer(), store=store)
            for line in sys.stdin:
                cpu = time.process_time()
                await session.run(prompt_text(int(line)))
                print(time.process_time() - cpu, flush=True)

    asyncio.run(go())


@contextlib.contextmanager
def fresh_session(target: str | None) -> Iterator[FreshSession | None]:
    if target is None:
        yield None
        return
    fresh = FreshSession(target)
    try:
        yield fresh
    finally:
        fresh.close()


def held_memory(make: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[tuple[Any, int]]]:
    """``make()`` under tracemalloc: what it returns and the bytes still allocated once it has returned
    (the returned object is alive, garbage collected around it)."""

    async def measure() -> tuple[Any, int]:
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            made = await make()
            gc.collect()
            return made, tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()

    return measure


def file_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))  # the file, -wal and -shm


# -- geppetto: Session on a store ----------------------------------------------------------------------
async def geppetto_store(
    result: Result, budget: Budget, target: str, size_of: Callable[[], int], fresh_target: str | None = None
) -> None:
    session_id = await geppetto_prompts(result, budget, target, fresh_target)
    result.disk = size_of()
    if not result.aborted:
        await restore_geppetto(result, budget, target, session_id)


async def geppetto_prompts(result: Result, budget: Budget, target: str, fresh_target: str | None = None) -> str:
    """One session of prompts on a store opened for it (its last prompts alternating with a fresh session's
    on ``fresh_target``, when given); then, while this process still holds the session, its restore on a
    newly opened store (``warm_restore``). Returns the session's id."""
    with contextlib.closing(open_store(target)) as store:
        session = Session(Answer(), store=store)

        async def one(i: int) -> None:
            await session.run(prompt_text(i))

        with fresh_session(fresh_target) as fresh:
            await run_prompts(result, budget, one, fresh)
        latest = session.latest
        assert latest is not None
        result.final_json = len(json.dumps(turn_to_dict(latest), ensure_ascii=False).encode())
        if not result.aborted:
            with contextlib.closing(open_store(target)) as other:
                start, cpu = time.perf_counter(), time.process_time()
                restored = await Session.restore(Answer(), other, session.session_id)
                result.warm_restore = time.perf_counter() - start
                result.warm_restore_cpu = time.process_time() - cpu
                assert restored.latest is not None and len(restored.latest.blocks) == 2 * result.size
                del restored
        return session.session_id


MAX_RESTORE = 1_000_000_000
"""Bytes on disk above which a restore is not tried (``--max-restore-mb``): today's stores load every
snapshot, in about twice their size on disk in memory."""


async def restore_geppetto(result: Result, budget: Budget, target: str, session_id: str) -> None:
    """Restore time on a freshly opened store; then, if the budget allows, the memory of a second restore."""
    if result.disk is not None and result.disk > MAX_RESTORE:
        result.note = f"restore not tried: the store holds {result.disk / 1e6:,.0f} MB (over --max-restore-mb)"
        return
    with contextlib.closing(open_store(target)) as store:
        start = time.perf_counter()
        session = await Session.restore(Answer(), store, session_id)
        result.restore = time.perf_counter() - start
        assert session.latest is not None and len(session.latest.blocks) == 2 * result.size, "restored too little"
        del session
    if budget.left() < 3 * result.restore:  # tracemalloc slows a restore down about threefold
        result.note = f"memory not measured: a traced restore would pass the {budget.seconds:.0f} s budget"
        return
    with contextlib.closing(open_store(target)) as store:
        _, result.memory = await held_memory(lambda: Session.restore(Answer(), store, session_id))()


def run_sqlite(size: int, budget: Budget, folder: Path) -> Result:
    result = Result("sqlite", size)
    path = folder / f"sqlite-{size}.db"
    fresh = str(folder / f"sqlite-{size}-fresh.db")
    asyncio.run(geppetto_store(result, budget, str(path), lambda: file_size(path), fresh))
    return result


@contextlib.contextmanager
def postgres_schema() -> Iterator[tuple[str, str]]:
    """A URL on a fresh schema and the schema's name (dropped afterwards); RuntimeError saying why not."""
    try:
        import psycopg
    except ImportError:
        raise RuntimeError("psycopg is not installed: pip install 'geppetto[postgres]'") from None
    schema = f"geppetto_bench_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
    except psycopg.OperationalError as exc:
        raise RuntimeError(f"{POSTGRES_URL} is not reachable: {str(exc).strip().splitlines()[0]}") from None
    try:
        yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}", schema
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def postgres_size(schema: str) -> int:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute("VACUUM")  # settle the free-space and visibility maps, as a database left alone would
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0


def run_postgres(size: int, budget: Budget, folder: Path) -> Result:
    result = Result("postgres", size)
    try:
        with postgres_schema() as (url, schema):
            asyncio.run(geppetto_store(result, budget, url, lambda: postgres_size(schema), url))
    except RuntimeError as exc:
        result.note = f"skipped: {exc}"
    return result


# -- geppetto serve ----------------------------------------------------------------------------------
def _serve_child(port: int, store: str) -> None:
    import uvicorn

    from geppetto.server import create_app

    app = create_app(store=store, engine_for=lambda settings: Answer())
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


@contextlib.contextmanager
def serve_process(store: Path) -> Iterator[str]:
    """``geppetto serve``'s app with the answering engine in a child process; yields its base URL."""
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve-child", str(port), str(store)], stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120  # imports are slow on a busy machine
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the server exited: {proc.stderr.read() if proc.stderr else ''}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not answer /healthz in 120 s")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def run_serve(size: int, budget: Budget, folder: Path) -> Result:
    result = Result("serve", size)
    path = folder / f"serve-{size}.db"
    with serve_process(path) as url:
        session_id = asyncio.run(serve_prompts(result, budget, url))
    result.disk = file_size(path)

    async def after() -> None:
        with contextlib.closing(open_store(str(path))) as store:
            latest = (await store.load_session(session_id))[-1]
            result.final_json = len(json.dumps(turn_to_dict(latest), ensure_ascii=False).encode())
        if not result.aborted and budget.left() > 0:
            await restore_geppetto(result, budget, str(path), session_id)

    asyncio.run(after())
    return result


async def serve_prompts(result: Result, budget: Budget, url: str) -> str:
    """One session over REST on the server at ``url``; returns its id."""
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        created = await client.post("/api/sessions", json={})
        created.raise_for_status()
        session_id: str = created.json()["id"]

        async def one(i: int) -> None:
            posted = await client.post(f"/api/sessions/{session_id}/messages", json={"text": prompt_text(i)})
            posted.raise_for_status()
            params = {"after": posted.json()["after"], "until": "finished"}
            status = None
            async with client.stream("GET", f"/api/sessions/{session_id}/events", params=params) as events:
                async for line in events.aiter_lines():
                    if line.startswith("data: "):
                        event = json.loads(line[6:])
                        if event.get("type") == "run_finished":
                            status = event.get("status")
            if status != "completed":
                raise RuntimeError(f"prompt {i} ended {status!r}")

        await run_prompts(result, budget, one)
        if budget.left() > 0:
            result.get_session = len((await client.get(f"/api/sessions/{session_id}")).content)
    return session_id


# -- openai-agents' SQLiteSession --------------------------------------------------------------------
def agents_items(i: int) -> list[dict[str, Any]]:
    """The items a Runner adds for one prompt answered by one message."""
    return [
        {"role": "user", "content": prompt_text(i)},
        {
            "id": f"msg_{i}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": answer_text(i), "annotations": []}],
        },
    ]


def run_agents(size: int, budget: Budget, folder: Path) -> Result:
    result = Result("agents", size)
    try:
        from agents import SQLiteSession
    except ImportError as exc:
        result.note = f"skipped: {exc.name} is not installed; run `sh bench/setup.sh` and use bench/.venv"
        return result
    path = folder / f"agents-{size}.db"

    async def go() -> None:
        session = SQLiteSession("bench", str(path))

        async def one(i: int) -> None:
            await session.get_items()  # what Runner.run does first with a session: the history as input
            await session.add_items(agents_items(i))  # then the new input and the model's output

        await run_prompts(result, budget, one)
        items = await session.get_items()
        result.final_json = len(json.dumps(items, ensure_ascii=False).encode())
        session.close()
        result.disk = file_size(path)
        if result.aborted:
            return

        async def restore() -> tuple[Any, list[Any]]:
            restored = SQLiteSession("bench", str(path))
            return restored, await restored.get_items()

        start = time.perf_counter()
        restored, items = await restore()
        result.restore = time.perf_counter() - start
        assert len(items) == 2 * size
        restored.close()
        del restored, items
        (restored, _), result.memory = await held_memory(restore)()
        restored.close()

    asyncio.run(go())
    return result


RUNNERS: dict[str, Callable[[int, Budget, Path], Result]] = {
    "sqlite": run_sqlite,
    "postgres": run_postgres,
    "serve": run_serve,
    "agents": run_agents,
}


# -- output -----------------------------------------------------------------------------------------
def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.2f}"


def _mb(x: int | None) -> str:
    return "-" if x is None else f"{x / 1e6:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{a / b:.1f}x"


def report(results: list[Result], budget: float) -> None:
    print(f"# bench/long_sessions.py: one answer block per prompt, budget {budget:.0f} s per size; {machine()}\n")
    rows = []
    for r in results:
        done = f"{len(r.times)}" if not r.aborted else f"{len(r.times)} (aborted)"
        rows.append(
            [
                r.backend,
                r.size,
                done if r.times else "-",
                _ms(r.early()),
                _ms(r.late()),
                _ratio(r.late(), r.early()),
                _mb(r.disk),
                _mb(r.final_json),
                _ratio(r.disk, r.final_json),
                "-" if r.restore is None else f"{r.restore:.3f}",
                _mb(r.memory),
                _ratio(r.memory, r.final_json),
                r.cpu_ratio(),
                r.mean_cell(),
                "-" if r.warm_restore is None else f"{r.warm_restore:.3f} ({r.warm_restore_cpu or 0:.3f})",
            ]
        )
    headers = ["backend", "prompts", "run", "first 10 ms (median)", "last 10 ms", "last/first (<= 1.5x)", "disk MB"]
    headers += ["final JSON MB", "disk/JSON (<= 3x)", "restore s (< 1 s at 10,000)", "memory MB"]
    headers += ["memory/JSON (<= 20x)", "CPU ms first 100 / last 100 (medians)"]
    headers += ["mean CPU ms last 100 / fresh 11-110 (<= 1.5x)", "warm restore s (CPU s) (< 0.3 s)"]
    print(table(headers, rows))
    serve = [r for r in results if r.backend == "serve" and r.times]
    if serve:
        print()
        srows = []
        for r in serve:
            early, late = r.window(SERVE_EARLY, SERVE_EARLY + 9), r.window(SERVE_LATE - 9, SERVE_LATE)
            srows.append([r.size, _ms(early), _ms(late), _ratio(late, early), _mb(r.get_session)])
        print(
            table(
                ["serve prompts", "prompts 10-19 ms", "prompts 1,991-2,000 ms", "ratio (<= 2x)", "GET session MB"],
                srows,
            )
        )
    notes = [f"{r.backend} {r.size}: {r.note}" for r in results if r.note]
    if notes:
        print("\n" + "\n".join(notes))
    print("\n" + summary(results))


def summary(results: list[Result]) -> str:
    """The targets of issue 29, one clause per target, for geppetto's backends."""
    parts = []
    for backend in ("sqlite", "postgres", "serve"):
        mine = {r.size: r for r in results if r.backend == backend and r.times}
        if not mine:
            continue
        small, big = mine.get(100), mine.get(10000)
        top = max(mine.values(), key=lambda r: r.size)  # the longest session: the targets are about length
        if small and big and not big.aborted and small.late() and big.late():
            growth = f"10,000 vs 100 per prompt {big.late() / small.late():.1f}x (target <= 1.5x)"  # type: ignore[operator]
        else:
            growth = f"last/first at {len(top.times)} prompts {_ratio(top.late(), top.early())} (target <= 1.5x)"
        disk = top.disk / top.final_json if top.disk and top.final_json else None
        mem = top.memory / top.final_json if top.memory and top.final_json else None
        clause = f"{backend}: {growth}"
        if disk is not None:
            clause += f", disk {disk:.1f}x final JSON at {top.size} (target <= 3x)"
        if mem is not None:
            clause += f", memory {mem:.1f}x (target <= 20x)"
        alternated = [r for r in mine.values() if r.mean_ratio() is not None]
        if alternated:
            last = max(alternated, key=lambda r: r.size)
            clause += f", mean CPU last 100 / fresh {last.mean_ratio():.2f}x at {last.size} (target <= 1.5x)"
        warm = [r for r in mine.values() if r.warm_restore is not None]
        if warm:
            last = max(warm, key=lambda r: r.size)
            clause += (
                f", warm restore {last.warm_restore:.3f} s ({last.warm_restore_cpu or 0:.3f} s CPU) at {last.size}"
                " (target < 0.3 s at 10,000)"
            )
        restored = [r for r in mine.values() if r.restore is not None]
        if restored:
            last = max(restored, key=lambda r: r.size)
            clause += f", restore {last.restore:.3f} s at {last.size} (target < 1 s at 10,000)"
        if backend == "serve":
            longest = max(mine.values(), key=lambda r: len(r.times))
            early, late = longest.window(SERVE_EARLY, SERVE_EARLY + 9), longest.window(SERVE_LATE - 9, SERVE_LATE)
            if early and late:
                clause += f", prompt 2,000 vs 10 {late / early:.1f}x (target <= 2x)"
            else:
                clause += f", prompt 2,000 not reached ({len(longest.times)} run)"
        parts.append(clause)
    return "SUMMARY " + "; ".join(parts)


def main() -> None:
    global MAX_RESTORE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="prompts per session, comma-separated")
    parser.add_argument("--serve-sizes", default=None, help="sizes for the serve backend (default: --sizes)")
    parser.add_argument("--backends", default=",".join(BACKENDS), help=f"any of {','.join(BACKENDS)}")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds per size and backend")
    parser.add_argument("--max-restore-mb", type=float, default=MAX_RESTORE / 1e6, help="restore no larger store")
    args = parser.parse_args()
    MAX_RESTORE = int(args.max_restore_mb * 1e6)
    sizes = [int(s) for s in args.sizes.split(",")]
    serve_sizes = [int(s) for s in args.serve_sizes.split(",")] if args.serve_sizes else sizes
    backends = [b.strip() for b in args.backends.split(",")]
    unknown = set(backends) - set(BACKENDS)
    if unknown:
        parser.error(f"unknown backend(s) {', '.join(sorted(unknown))}; choose from {', '.join(BACKENDS)}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            for size in serve_sizes if backend == "serve" else sizes:
                result = RUNNERS[backend](size, Budget(args.budget), Path(tmp))
                print(f"{backend} {size}: {len(result.times)} prompts {result.note}", file=sys.stderr, flush=True)
                results.append(result)
                if result.note.startswith("skipped"):
                    break
    report(results, args.budget)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-child"]:
        _serve_child(int(sys.argv[2]), sys.argv[3])
    elif sys.argv[1:2] == ["--fresh-child"]:
        _fresh_child(sys.argv[2])
    else:
        main()
