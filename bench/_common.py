"""Shared benchmark helpers: the simulator in a separate process, timing, tables.

`python bench/_common.py serve STEPS` serves the simulator on a free loopback port, prints the OpenAI
base URL on its first line and runs until stdin closes. Its model is scripted by context, not by a
queue, so any number of concurrent clients get the same loop: while the context after the last user
message holds fewer than STEPS - 1 tool results it calls `get_weather`, then it answers in text.
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

PROMPT = "Check the weather in five cities, one call at a time."
INSTRUCTIONS = "You are a helpful assistant."
API_KEY = "sk-test"


def weather(city: str) -> str:
    """The benchmark tool body: cheap and deterministic, so the loop measures the client."""
    return f"{city}: 18C, light rain"


def pydantic_ai_loop(url: str, **agent_options: Any) -> Callable[[], Awaitable[int]]:
    """A coroutine function running the benchmark loop once on pydantic-ai (in the benchmark venv only): an
    Agent with OpenAIResponsesModel against ``url`` and the `get_weather` tool, ``agent_options`` passed to
    the Agent; returns the run's model steps."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIResponsesModel("sim-1", provider=OpenAIProvider(base_url=url, api_key=API_KEY))
    agent: Agent[None, str] = Agent(model, **agent_options)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        return weather(city)

    async def run() -> int:
        result = await agent.run(PROMPT)
        return sum(1 for m in result.all_messages() if m.kind == "response")

    return run


def _scripted_decide(steps: int, tool: str = "get_weather") -> Any:
    from geppetto.simulator._model import Msg, Reply, ToolCall

    def decide(msgs: list[Msg], tools: Any, choice: str = "auto", schema: Any = None) -> Reply:
        last_user = max((i for i, m in enumerate(msgs) if m.role == "user"), default=-1)
        results = sum(1 for m in msgs[last_user + 1 :] if m.role == "result")
        if results < steps - 1:
            return Reply(tool_calls=[ToolCall(tool, {"city": f"City{results}"})])
        return Reply(text=f"Done after {results} tool results.")

    return decide


def _serve(steps: int, tool: str) -> None:
    import geppetto.simulator._openai as openai_api
    from geppetto.simulator import serve

    openai_api.decide = _scripted_decide(steps, tool)  # type: ignore[attr-defined]
    with serve() as sim:
        print(sim.openai_url, flush=True)
        sys.stdin.read()  # the parent closes stdin to stop us


@contextlib.contextmanager
def simulator_process(steps: int, tool: str = "get_weather") -> Iterator[str]:
    """Run the scripted simulator in a child process (its model calls ``tool`` until ``steps`` - 1 results are
    in); yield its OpenAI base URL."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "serve", str(steps), tool], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1"):
            raise RuntimeError(f"simulator did not start (got {url!r}); run `sh bench/setup.sh` first")
        yield url
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def callgrind_instructions(*command: str, env: dict[str, str] | None = None) -> int:
    """Instructions ``command`` executes under valgrind's callgrind (the same count whatever else the machine
    does; hash seed fixed so dict and set layouts repeat); ``env`` replaces the environment."""
    import re
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        res = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", *command],
            capture_output=True,
            text=True,
            env={**(os.environ if env is None else env), "PYTHONHASHSEED": "0"},
            check=True,
        )
    found = re.search(r"Collected : (\d+)", res.stderr)
    assert found is not None, res.stderr[-500:]
    return int(found.group(1))


def machine() -> str:
    """One line of machine facts for the results."""
    return f"python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.platform()}"


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def percentile(xs: Sequence[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table, so the output pastes into docs/benchmarks.md as is."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _fmt(c: Any) -> str:
    if isinstance(c, float):
        return f"{c:.3g}" if abs(c) < 100 else f"{c:,.0f}"
    return str(c)


if __name__ == "__main__":
    if len(sys.argv) in (3, 4) and sys.argv[1] == "serve":
        _serve(int(sys.argv[2]), sys.argv[3] if len(sys.argv) == 4 else "get_weather")
    else:
        sys.exit("usage: python bench/_common.py serve STEPS [TOOL]")
