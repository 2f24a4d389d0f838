"""What the server and bus tests share: broker URLs and skips when a broker is absent."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

NODE_DIR = Path(__file__).with_name("node")
"""The front-end packages the tests use as independent clients (package.json, package-lock.json)."""

REDIS_URL = os.environ.get("GEPPETTO_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
NATS_URL = os.environ.get("GEPPETTO_TEST_NATS_URL", "nats://127.0.0.1:4222")
BUS_URLS = {"memory": "memory://", "redis": REDIS_URL, "nats": NATS_URL}


def reachable(url: str) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 0), timeout=2):
            return True
    except OSError:
        return False


def bus_url(kind: str) -> str:
    """The URL of a ``kind`` bus, or a skip naming the server to start when it does not answer."""
    url = BUS_URLS[kind]
    if kind != "memory" and not reachable(url):
        variable = f"GEPPETTO_TEST_{kind.upper()}_URL"
        pytest.skip(f"{kind} is not reachable at {url}; start it (see docs/server.md) or set {variable}")
    return url


def sse_events(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Server-Sent Events from a response's lines: dicts with ``id``, ``event`` and ``data`` (decoded JSON
    when it is JSON); comments are skipped."""
    event: dict[str, Any] = {}
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                text = "\n".join(data)
                try:
                    event["data"] = json.loads(text)
                except ValueError:
                    event["data"] = text
                yield event
            event, data = {}, []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            else:
                event[name] = value


@contextlib.contextmanager
def running_app(app: Any) -> Iterator[str]:
    """``app`` served on a free loopback port (its lifespan run); yields the base URL."""
    from geppetto._asgi import ThreadedServer

    server = ThreadedServer(app, lifespan="on", name="geppetto-serve-test")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def sim_profile(sim: Any, provider: str = "openai-responses", **settings: Any) -> Any:
    from geppetto.profiles import Profile

    base = sim.openai_url if provider.startswith("openai") else sim.url
    return Profile(name="test", provider=provider, model="sim-1", base_url=base, simulator=True, **settings)


class Worker:
    """``geppetto serve`` in a subprocess on a free port; ``url`` once it answers ``/healthz``."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, script: bool = False) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # ``script``: args are a script and its arguments after the port (a server of the test's own).
        command = (
            [args[0], str(self.port), *args[1:]]
            if script
            else ["-m", "geppetto", "serve", "--port", str(self.port), *args]
        )
        self.proc = subprocess.Popen(
            [sys.executable, *command],
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                output = self.proc.stdout.read() if self.proc.stdout else ""
                raise AssertionError(f"geppetto serve exited with {self.proc.returncode}:\n{output}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError("geppetto serve did not answer /healthz within 30 s")
            time.sleep(0.1)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.stdout.read() if self.proc.stdout else ""


@contextlib.contextmanager
def two_script_workers(*args: str) -> Iterator[tuple[Worker, Worker]]:
    """Two server processes running the same script (``Worker(*args, script=True)``), both stopped after."""
    first = Worker(*args, script=True)
    try:
        second = Worker(*args, script=True)
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


def write_sim_profile(sim: Any, name: str = "simtest") -> None:
    """A profiles file (in the test's config folder) with ``name`` pointing at ``sim``'s Responses API."""
    folder = Path(os.environ["GEPPETTO_CONFIG_DIR"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "profiles.yaml").write_text(
        f"profiles:\n  {name}:\n    provider: openai-responses\n    model: sim-1\n"
        f"    base_url: {sim.openai_url}\n    simulator: true\n"
    )


def node_modules() -> Path:
    """``NODE_DIR``'s packages, installed from its lock file on first use; a skip naming what is missing
    when Node.js, npm or the registry is not there."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js and npm are not installed; these tests use front-end packages run by Node")
    wanted = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]
    if not all((NODE_DIR / "node_modules" / name / "package.json").is_file() for name in wanted):
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            pytest.skip(f"npm ci could not install {', '.join(wanted)} (no registry?): {done.stderr.strip()[-300:]}")
    return NODE_DIR / "node_modules"


async def edited_session_report(sim: Any, path: Path) -> dict[str, Any]:
    """The report of a session whose system prompt a middleware changes before the third prompt (so the
    third request falls back to the whole Turn)."""
    import geppetto as gp
    from geppetto.middleware import system_prompt
    from geppetto.session.stores import open_store
    from geppetto.turns import Turn
    from geppetto.web import session_report

    store = open_store(str(path))
    system = ["be terse"]

    def changing_system(next_handler: Any) -> Any:
        async def handler(turn: Turn) -> Turn:
            return await system_prompt(system[0])(next_handler)(turn)

        return handler

    async with sim.engine("openai-responses") as engine:
        session = gp.Session(engine, store=store, session_id="s1", middlewares=[changing_system], record_events=True)
        await session.run("Hello")
        await session.run("Again")
        system[0] = "be verbose"
        await session.run("Third")
    report = session_report(await store.load_session("s1"), await store.load_events("s1"), session_id="s1")
    store.close()
    return report


def model_calls(sim: Any) -> list[dict[str, Any]]:
    """The bodies of the Responses requests the simulator received, in order."""
    return [r.body for r in sim.requests if r.method == "POST" and r.path.endswith("/responses")]


def input_bytes(body: dict[str, Any]) -> int:
    """The bytes of a request body's ``input`` array as the transport sends it (compact JSON)."""
    return len(json.dumps(body["input"], ensure_ascii=False, separators=(",", ":")).encode())


async def save_long_session(store: Any, session_id: str, prompts: int) -> None:
    """Add ``prompts`` prompts to ``session_id`` through the store API alone (a question and an answer per
    snapshot, with the ``final`` event a chained Responses request records), quickly."""
    from geppetto.events import EventFinal, EventMetadata, EventTextDelta
    from geppetto.turns import BLOCK_META_INFERENCE_ID, BLOCK_META_RESPONSE_ID, TURN_META_INFERENCE_ID, Block, Turn

    turn = await store.load_latest(session_id) or Turn()
    start = await store.latest_seq(session_id)
    last = [BLOCK_META_RESPONSE_ID.get(b.metadata) for b in turn.blocks if BLOCK_META_RESPONSE_ID.get(b.metadata)]
    previous = last[-1] if last else None
    for k in range(start, start + prompts):
        inference, response = f"{session_id}-inference-{k}", f"{session_id}-response-{k}"
        TURN_META_INFERENCE_ID.set(turn.metadata, inference)
        question, answer = Block.user(f"question {k}"), Block.llm_text(f"answer {k}")
        for block in (question, answer):
            BLOCK_META_INFERENCE_ID.set(block.metadata, inference)
        BLOCK_META_RESPONSE_ID.set(answer.metadata, response)
        turn.blocks.append(question)
        sent = [question.id] if previous else [b.id for b in turn.blocks]
        turn.blocks.append(answer)
        extra = {
            "response_id": response,
            "responses.mode": "chained" if previous else "stateless",
            "responses.anchor": previous,
            "responses.full": previous is None,
            "responses.sent": sent,
        }
        meta = EventMetadata(inference_id=inference, provider="openai", extra=extra)
        at = time.time()
        events = [(at, EventTextDelta(meta, delta=answer.text)), (at, EventFinal(meta, text=answer.text))]
        await store.save_snapshot(session_id, turn, events=events)
        previous = response
