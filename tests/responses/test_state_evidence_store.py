"""An endpoint verdict learned once is kept in the session store, with the time it was learned: a new
engine, and a new process, read it there and do not pay for the evidence again."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine, Verdict, endpoint_verdicts
from geppetto.session.stores import open_store
from geppetto.simulator import Reply, Simulator, serve


@pytest.fixture
def quirky() -> Iterator[Simulator]:
    with serve(quirks=["no-echo", "no-usage"]) as sim:
        yield sim


def _settling(sim: Simulator, since: int = 0) -> list[str]:
    return [f"{r.method} {r.path}" for r in sim.requests[since:] if r.method == "GET"]


def _chained(sim: Simulator, since: int = 0) -> list[bool]:
    posts = [r for r in sim.requests[since:] if r.method == "POST" and r.path == "/v1/responses"]
    return ["previous_response_id" in r.body for r in posts]


async def _two_prompts(sim: Simulator, store: Any) -> None:
    eng = ResponsesEngine("sim-1", api_key="sk-test", base_url=sim.openai_url)
    sim.queue(Reply(text="One."), Reply(text="Two."))
    session = gp.Session(eng, store=store)
    await session.run("a")
    await session.run("b")


async def test_a_verdict_learned_once_is_read_from_the_store_by_a_new_engine(quirky: Simulator, tmp_path: Path) -> None:
    sim, path = quirky, tmp_path / "sessions.db"
    with open_store(path) as store:
        await _two_prompts(sim, store)
        # no echo and no usage: the answer was read back once to settle it
        assert len(_settling(sim)) == 1 and _chained(sim) == [False, True]
        saved = await store.load_endpoint_verdict(sim.openai_url, "sim-1")
    assert saved is not None
    verdict = Verdict.from_dict(saved)
    assert verdict.previous_response_id in ("kept", "unknown") and verdict.evidence == "response_get"
    assert verdict.learned_at > 0
    endpoint_verdicts.clear()  # what this process learned is gone: only the store knows
    before = len(sim.requests)
    with open_store(path) as store:
        await _two_prompts(sim, store)
    assert _settling(sim, before) == [] and _chained(sim, before) == [False, True]


def test_a_new_process_reads_the_verdict_and_does_not_pay_again(quirky: Simulator, tmp_path: Path) -> None:
    sim, path = quirky, tmp_path / "sessions.db"
    script = textwrap.dedent(
        f"""
        import asyncio, json, logging, sys
        import geppetto as gp
        from geppetto.providers.openai_responses import ResponsesEngine
        from geppetto.session.stores import open_store

        logging.basicConfig(level=logging.INFO, stream=sys.stderr)

        async def main():
            with open_store({str(path)!r}) as store:
                eng = ResponsesEngine("sim-1", api_key="sk-test", base_url={sim.openai_url!r})
                session = gp.Session(eng, store=store)
                await session.run("a")
                out = await session.run("b")
                verdict = eng.endpoint_verdict
                print(json.dumps({{"answer": out.blocks[-1].text, "verdict": verdict.to_dict() if verdict else None}}))

        asyncio.run(main())
        """
    )
    runs = []
    for replies in (("One.", "Two."), ("Three.", "Four.")):
        sim.queue(*(Reply(text=t) for t in replies))
        before = len(sim.requests)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        runs.append((json.loads(done.stdout), _settling(sim, before), _chained(sim, before), done.stderr))
    (first, settled, chained, _), (second, settled_again, chained_again, log) = runs
    assert first["answer"] == "Two." and second["answer"] == "Four."
    assert len(settled) == 1 and chained == [False, True]
    # the second process found the verdict in the store: no request to settle it, and it chained
    assert settled_again == [] and chained_again == [False, True]
    assert second["verdict"]["learned_at"] == first["verdict"]["learned_at"]
    assert "(from the store)" in log


async def test_the_inspector_says_which_evidence_decided(tmp_path: Path) -> None:
    from geppetto.web import session_report

    with serve(quirks=["forgets", "foreign-echo"]) as sim, open_store(tmp_path / "s.db") as store:
        eng = ResponsesEngine("sim-1", api_key="sk-test", base_url=sim.openai_url)
        session = gp.Session(eng, store=store, session_id="s1", record_events=True)
        sim.queue(Reply(text="A first answer, with more words in it than the question."))
        await session.run("Remember seven, please.")
        sim.queue(Reply(text="FORGOTTEN"), Reply(text="Seven."))
        await session.run("Which number?")
        report = session_report(await store.load_session("s1"), await store.load_events("s1"), session_id="s1")
    requests = report["requests"]
    assert [(r["mode"], r["fallback"]) for r in requests] == [
        ("stateless", None),
        ("stateless", "server_ignores_state"),
    ]
    assert requests[0]["state_evidence"] is None
    evidence = requests[1]["state_evidence"]
    assert evidence.startswith("ignored (usage: echo 'resp_") and "fewer than the" in evidence
    assert requests[1]["fallback_detail"].startswith("previous_response_id ignored: ignored (usage: ")
