"""Sessions across processes, on SQLite and on PostgreSQL: a new process resumes a chained conversation and
sends only the new blocks; a process SIGKILLed mid-inference loses nothing that had completed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from geppetto.session.stores import open_store
from geppetto.simulator import Simulator
from geppetto.turns import BLOCK_META_RESPONSE_ID, BlockKind, Turn

WORKER = Path(__file__).with_name("store_worker.py")


class Worker:
    """``store_worker.py`` in a subprocess: one prompt per line in, ``done N TURN_ID`` per saved snapshot out."""

    def __init__(self, target: str, sim: Simulator, session_id: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), target, sim.openai_url, session_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def send(self, prompt: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(prompt + "\n")
        self.proc.stdin.flush()

    def ask(self, prompt: str) -> str:
        """Send ``prompt`` and wait for its snapshot's turn id."""
        self.send(prompt)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("done "), f"worker said {line!r} (exit code {self.proc.poll()})"
        return line.split()[2]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


def ask_once(target: str, sim: Simulator, session_id: str, prompt: str) -> str:
    worker = Worker(target, sim, session_id)
    try:
        return worker.ask(prompt)
    finally:
        worker.close()


def load(target: str, session_id: str) -> list[Turn]:
    async def go() -> list[Turn]:
        with open_store(target) as store:
            return await store.load_session(session_id)

    return asyncio.run(go())


def response_posts(sim: Simulator) -> list[dict[str, Any]]:
    return [r.body for r in sim.requests if r.method == "POST" and r.path == "/v1/responses"]


def last_response_id(turn: Turn) -> str:
    ids = [BLOCK_META_RESPONSE_ID.get(b.metadata) for b in turn.blocks if b.kind is BlockKind.LLM_TEXT]
    assert ids and ids[-1]
    return ids[-1]


def user_item(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_resume_in_a_new_process_sends_only_new_blocks(store_target: str, geppetto_sim: Simulator) -> None:
    first_turn = ask_once(store_target, geppetto_sim, "chat-1", "Hello there")
    [first] = load(store_target, "chat-1")
    assert first.id == first_turn

    second_turn = ask_once(store_target, geppetto_sim, "chat-1", "What did I say?")
    posts = response_posts(geppetto_sim)
    assert len(posts) == 2
    assert "previous_response_id" not in posts[0] and posts[0]["input"] == [user_item("Hello there")]
    # The new process chains from the stored anchor: only the new user message travels.
    assert posts[1]["previous_response_id"] == last_response_id(first)
    assert posts[1]["input"] == [user_item("What did I say?")]
    snapshots = load(store_target, "chat-1")
    assert [t.id for t in snapshots] == [first_turn, second_turn]
    assert snapshots[0] == first  # the earlier snapshot is untouched

    # The server forgets the anchor: the next process falls back to the full Turn once and goes on.
    geppetto_sim.forget(last_response_id(snapshots[1]))
    ask_once(store_target, geppetto_sim, "chat-1", "Third")
    posts = response_posts(geppetto_sim)
    assert len(posts) == 4
    assert posts[2]["previous_response_id"] == last_response_id(snapshots[1])
    assert posts[2]["input"] == [user_item("Third")]
    assert "previous_response_id" not in posts[3]
    assert [item.get("role") for item in posts[3]["input"]] == ["user", "assistant", "user", "assistant", "user"]
    assert posts[3]["input"][-1] == user_item("Third")
    assert len(load(store_target, "chat-1")) == 3


def test_sigkill_mid_inference_loses_nothing_completed(store_target: str, geppetto_sim: Simulator) -> None:
    worker = Worker(store_target, geppetto_sim, "killed")
    try:
        done = [worker.ask(f"question {i}") for i in range(3)]
        # The fourth answer stalls after its first event; the process dies while it streams.
        geppetto_sim.fail_next(stall_after=1, stall_seconds=20)
        worker.send("question 3")
        deadline = time.monotonic() + 30
        while len(response_posts(geppetto_sim)) < 4:
            assert time.monotonic() < deadline, "the fourth request never reached the simulator"
            time.sleep(0.02)
    finally:
        os.kill(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait(timeout=30)
    snapshots = load(store_target, "killed")
    assert [t.id for t in snapshots] == done
    for i, turn in enumerate(snapshots):
        users = [b.text for b in turn.blocks if b.kind is BlockKind.USER]
        assert users == [f"question {j}" for j in range(i + 1)]
        assert turn.blocks[-1].kind is BlockKind.LLM_TEXT

    async def events() -> set[str]:
        with open_store(store_target) as store:
            return {e.inference_id for e in await store.load_events("killed")}

    assert len(asyncio.run(events())) == 3  # each completed inference's log, nothing of the killed one
    # And the session goes on from its last complete snapshot.
    assert ask_once(store_target, geppetto_sim, "killed", "question 4")
    assert len(load(store_target, "killed")) == 4
