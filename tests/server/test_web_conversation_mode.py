"""The inspector in conversation mode: its requests are counted as conversation (never as one chained and one
stateless), the next request names the conversation (never a previous_response_id), and counts read right."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import geppetto as gp
from geppetto.session._totals import add_totals
from geppetto.session.stores import open_store
from geppetto.simulator import Simulator
from geppetto.turns import save_turn
from geppetto.web import dashboard, session_report


async def conversation_report(sim: Simulator, path: Path) -> tuple[dict[str, Any], gp.Turn]:
    store = open_store(str(path))
    async with sim.engine("openai-responses", mode="conversation") as engine:
        session = gp.Session(engine, store=store, session_id="c1", record_events=True)
        await session.run("Hello")
        turn = await session.run("Again")
    report = session_report(await store.load_session("c1"), await store.load_events("c1"), session_id="c1")
    store.close()
    return report, turn


async def test_conversation_requests_are_counted_as_conversation(geppetto_sim: Simulator, tmp_path: Path) -> None:
    report, _ = await conversation_report(geppetto_sim, tmp_path / "s.db")
    assert [r["mode"] for r in report["requests"]] == ["conversation", "conversation"]
    totals = report["totals"]
    assert (totals["requests"], totals["conversation"], totals["chained"], totals["stateless"]) == (2, 2, 0, 0)
    conversation = report["requests"][1]["conversation"]
    assert conversation and conversation.startswith("conv_")
    # the next request (after a new prompt), by the engine's own plan: in the same conversation
    chained = report["chained"]
    assert chained["mode"] == "conversation" and chained["next"]["conversation"] == conversation
    assert chained["next"]["anchor"] is None  # never a previous_response_id in conversation mode
    both = dashboard([report, report])
    assert (both["conversation"], both["chained"], both["stateless"]) == (4, 0, 0)
    old = {k: v for k, v in report["totals"].items() if k != "conversation"}  # a summary kept before the key
    assert add_totals(old, report["totals"])["conversation"] == 2


def test_inspect_names_the_conversation_as_the_next_anchor(geppetto_sim: Simulator, tmp_path: Path) -> None:
    _, turn = asyncio.run(conversation_report(geppetto_sim, tmp_path / "s.db"))
    path = tmp_path / "turn.yaml"
    save_turn(path, turn)
    out = subprocess.run(
        [sys.executable, "-m", "geppetto", "inspect", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"COLUMNS": "300", "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
    )
    assert out.returncode == 0, out.stderr
    said = " ".join(out.stdout.rsplit("┘", 1)[1].split())  # what follows the table, unwrapped
    # nothing follows the last answer: the conversation holds the whole Turn, and the next prompt goes into it
    assert said.startswith(
        f"conversation: the server holds all {len(turn.blocks)} blocks; the next prompt is sent alone, "
        "with conversation=conv_"
    ), said
    assert "previous_response_id" not in said


def test_counts_read_right_in_the_pages() -> None:
    from geppetto.web import asset

    script = asset("app.js").decode()
    assert "(s)" not in script.replace("(s) =>", "")  # no "1 session(s)": counts are spelt out
    assert "requests · ${t.chained" not in script  # the summary no longer says "1 requests"
