"""The client CPU a structured-output request adds over a plain one, on each engine.

Each engine sends the same prompt plainly and with ``output=City`` (a pydantic model with an optional
field, an enum and a nested list). The simulator answers the first (structured) request; its reply bytes
are replayed for every request after it, plain ones included, so both kinds parse the very same answer
and the loop measures what the schema adds on the client (build the body with the provider's schema,
encode it, validate and record the answer), not the server, the socket or a longer answer.
Rounds alternate plain and structured runs; figures are process CPU per request (the median round).
The first structured request of a new model class, which prepares its schema, is timed on its own.

Run: ``.venv/bin/python bench/structured_output.py [REQUESTS_PER_ROUND] [ROUNDS]`` (default 300, 7).

``--instructions [N]`` counts instructions instead of timing (valgrind's callgrind, which gives the same
count for the same run whatever else the machine does): each engine's replies are recorded from the
simulator once, then a child process per case replays them through an ``httpx.MockTransport`` and runs N
requests (default 100); the cost of making the turns is measured apart and subtracted.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import httpx
import pydantic
from _common import callgrind_instructions

from geppetto import output_config
from geppetto.output import STRUCTURED_OUTPUT, wire_schema
from geppetto.simulator import serve
from geppetto.turns import Block, Turn

PROMPT = "Describe Paris, a capital of 2100000 people"
MODELS = {
    "openai-responses": "sim-1",
    "openai-chat": "sim-1",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
}


class Landmark(pydantic.BaseModel):
    name: str
    year_built: int | None = None


class City(pydantic.BaseModel):
    name: str
    population: int
    country: str | None = None
    kind: Literal["capital", "town"]
    landmarks: list[Landmark] = []


class Replay(httpx.AsyncBaseTransport):
    """Forwards the first request to the simulator and replays its reply bytes for every later request, so
    plain and structured requests get the very same answer (the JSON) and differ only in the client's work."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.saved: tuple[int, list[tuple[bytes, bytes]], bytes] | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.saved is None:
            response = await self.inner.handle_async_request(request)
            body = await response.aread()
            self.saved = (response.status_code, list(response.headers.raw), body)
        status, headers, body = self.saved
        return httpx.Response(status, headers=headers, content=body)


def turn(structured: bool, config: Any) -> Turn:
    t = Turn()
    t.append(Block.user(PROMPT))
    if structured:
        STRUCTURED_OUTPUT.set(t.data, config)
    return t


async def cpu_per_request(engine: Any, structured: bool, config: Any, n: int) -> float:
    turns = [turn(structured, config) for _ in range(n)]  # made before the clock starts: a run sets it once
    gc.collect()
    gc.freeze()  # the prepared turns are not the request's garbage
    start = time.process_time()
    for t in turns:
        await engine.run_inference(t)
    spent = (time.process_time() - start) / n
    gc.unfreeze()
    return spent


def cpu_to_ask(config: Any, n: int) -> float:
    """CPU per run to put the config in a turn's data (what Session.run(output=...) does once per run)."""
    start = time.process_time()
    for _ in range(n):
        STRUCTURED_OUTPUT.set(Turn().data, config)
    return (time.process_time() - start) / n


async def bench(provider: str, sim_url: str, openai_url: str, n: int, rounds: int) -> tuple[float, float]:
    from geppetto.profiles import ENGINE_CLASSES

    base = openai_url if provider.startswith("openai") else sim_url
    options: dict[str, Any] = {"mode": "stateless"} if provider == "openai-responses" else {}
    client = httpx.AsyncClient(transport=Replay())
    module, name = ENGINE_CLASSES[provider]
    cls = getattr(__import__(module, fromlist=[name]), name)
    eng = cls(model=MODELS[provider], api_key="sk-sim", base_url=base, http=client, **options)
    config = output_config(City)
    warm = await eng.run_inference(turn(True, config))
    assert warm.blocks[-1].text.startswith("{"), warm.blocks[-1].text
    await eng.run_inference(turn(False, config))
    plain, structured = [], []
    for _ in range(rounds):
        plain.append(await cpu_per_request(eng, False, config, n))
        structured.append(await cpu_per_request(eng, True, config, n))
    await client.aclose()
    return statistics.median(plain), statistics.median(structured)


def first_request_cost() -> float:
    """CPU to prepare a new model class's schema and its four wire forms (what the first request adds)."""

    class Fresh(pydantic.BaseModel):
        name: str
        population: int
        country: str | None = None
        kind: Literal["capital", "town"]
        landmarks: list[Landmark] = []

    start = time.process_time()
    config = output_config(Fresh)
    for dialect in ("openai", "anthropic", "gemini"):
        wire_schema(config, dialect)  # type: ignore[arg-type]
    return time.process_time() - start


# -- instruction counts ---------------------------------------------------------------------------


async def _record(path: str) -> None:
    """Save each engine's structured reply bytes (the simulator's answer) to ``path``."""
    from geppetto.profiles import ENGINE_CLASSES

    saved: dict[str, Any] = {}
    with serve() as sim:
        for provider, model in MODELS.items():
            replay = Replay()
            module, name = ENGINE_CLASSES[provider]
            cls = getattr(__import__(module, fromlist=[name]), name)
            base = sim.openai_url if provider.startswith("openai") else sim.url
            options: dict[str, Any] = {"mode": "stateless"} if provider == "openai-responses" else {}
            async with cls(
                model=model, api_key="sk-sim", base_url=base, http=httpx.AsyncClient(transport=replay), **options
            ) as eng:
                await eng.run_inference(turn(True, output_config(City)))
            assert replay.saved is not None
            status, headers, body = replay.saved
            saved[provider] = [status, [(k.decode(), v.decode()) for k, v in headers], base64.b64encode(body).decode()]
    Path(path).write_text(json.dumps(saved))  # noqa: ASYNC240 - a benchmark's setup, nothing else waits


async def _child(path: str, provider: str, structured: bool, n: int, build_only: bool) -> None:
    """Make N turns and (unless ``build_only``) run them through the engine on the recorded reply."""
    from geppetto.profiles import ENGINE_CLASSES

    status, headers, encoded = json.loads(Path(path).read_text())[provider]  # noqa: ASYNC240
    body = base64.b64decode(encoded)
    transport = httpx.MockTransport(lambda request: httpx.Response(status, headers=headers, content=body))
    module, name = ENGINE_CLASSES[provider]
    cls = getattr(__import__(module, fromlist=[name]), name)
    base = "http://127.0.0.1:9/v1" if provider.startswith("openai") else "http://127.0.0.1:9"
    options: dict[str, Any] = {"mode": "stateless"} if provider == "openai-responses" else {}
    config = output_config(City)
    async with cls(
        model=MODELS[provider], api_key="sk-sim", base_url=base, http=httpx.AsyncClient(transport=transport), **options
    ) as eng:
        for warm in (True, False):
            await eng.run_inference(turn(warm, config))
        turns = [turn(structured, config) for _ in range(n)]
        if not build_only:
            for t in turns:
                await eng.run_inference(t)


def _instructions(path: str, *args: str) -> int:
    return callgrind_instructions(sys.executable, __file__, "--child", path, *args)


def count_instructions(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/replies.json"
        asyncio.run(_record(path))
        print(f"instructions per request (callgrind, {n} requests, turn making subtracted)")
        print(f"{'engine':<18} {'plain':>10} {'structured':>11} {'added':>8}")
        worst = 0.0
        for provider in MODELS:
            per: dict[bool, float] = {}
            for structured in (False, True):
                flag = "1" if structured else "0"
                made = _instructions(path, provider, flag, str(n), "build-only")
                ran = _instructions(path, provider, flag, str(n))
                per[structured] = (ran - made) / n
            added = per[True] / per[False] - 1
            worst = max(worst, added)
            print(f"{provider:<18} {per[False] / 1e3:>8.0f}k {per[True] / 1e3:>9.0f}k {added:>+7.1%}")
    print(f"SUMMARY structured output adds at most {worst:+.1%} instructions per request after the first (target < 5%)")


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        path, provider, structured, n = sys.argv[2:6]
        asyncio.run(_child(path, provider, structured == "1", int(n), build_only=len(sys.argv) > 6))
        return
    if sys.argv[1:2] == ["--instructions"]:
        count_instructions(int(sys.argv[2]) if len(sys.argv) > 2 else 100)
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    print(f"client CPU per request, median of {rounds} rounds of {n} requests; replies replayed from memory")
    print(f"{'engine':<18} {'plain':>10} {'structured':>11} {'added':>8}")
    worst = 0.0
    with serve() as sim:
        for provider in MODELS:
            plain, structured = asyncio.run(bench(provider, sim.url, sim.openai_url, n, rounds))
            added = structured / plain - 1
            worst = max(worst, added)
            print(f"{provider:<18} {plain * 1e6:>8.0f}us {structured * 1e6:>9.0f}us {added:>+7.1%}")
    print(f"setting the config in a turn, once per run: {cpu_to_ask(output_config(City), 2000) * 1e6:.0f}us")
    first = first_request_cost()
    print(f"first request of a new model class: +{first * 1e3:.2f} ms once (schema and wire forms prepared)")
    print(f"SUMMARY structured output adds at most {worst:+.1%} client CPU per request after the first (target < 5%)")


if __name__ == "__main__":
    main()
