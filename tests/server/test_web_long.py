"""The dashboard and the Turn inspector on long sessions: the dashboard reads one kept summary per session,
the inspector a window of snapshots with their events; both show what the whole history shows."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import edited_session_report, running_app, save_long_session, sim_profile

import geppetto as gp
from geppetto.server import create_app
from geppetto.session.stores import SQLTurnStore, open_store
from geppetto.simulator import Simulator
from geppetto.web import dashboard, session_report, session_totals


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int]]]:
    """Every statement a store runs that returns rows, with how many it returned."""
    seen: list[tuple[str, int]] = []
    original = SQLTurnStore._rows

    def counting(self: SQLTurnStore, conn: Any, statement: str, params: Any = ()) -> list[tuple[Any, ...]]:
        rows = original(self, conn, statement, params)
        seen.append((" ".join(statement.split()), len(rows)))
        return rows

    monkeypatch.setattr(SQLTurnStore, "_rows", counting)
    yield seen


def _rows_from(reads: list[tuple[str, int]], table: str) -> int:
    return sum(n for statement, n in reads if f"FROM {table} " in statement + " ")


async def _history_totals(path: Path, session_id: str) -> dict[str, Any]:
    """The totals as the dashboard computed them before summaries were kept: from every snapshot and event."""
    with open_store(str(path)) as store:
        snapshots = await store.load_session(session_id)
        totals = session_totals(snapshots, await store.load_events(session_id), session_id=session_id)
    first = next((b.text for b in snapshots[0].blocks if b.role == "user"), "")
    return {**totals, "first_prompt": first}  # the dashboard names a session by its first prompt


def test_a_long_session_costs_the_dashboard_and_the_inspector_the_same_at_30_and_300_prompts(
    geppetto_sim: Simulator, tmp_path: Path, reads: list[tuple[str, int]]
) -> None:
    path = tmp_path / "s.db"

    async def grow(prompts: int) -> None:
        with open_store(str(path)) as store:
            await save_long_session(store, "long", prompts)
            if not await store.latest_seq("short"):
                await save_long_session(store, "short", 3)

    app = create_app(sim_profile(geppetto_sim), store=str(path))
    seen: dict[int, dict[str, Any]] = {}
    with running_app(app) as url, httpx.Client(base_url=url) as client:

        def read(route: str) -> tuple[dict[str, Any], list[tuple[str, int]]]:
            reads.clear()
            response = client.get(route)
            assert response.status_code == 200, response.text
            return response.json(), list(reads)

        read("/api/dashboard")  # the store opens (and checks its schema) on first use
        for prompts in (30, 270):
            asyncio.run(grow(prompts))
            board, board_reads = read("/api/dashboard")
            report, report_reads = read("/api/sessions/long/inspect?limit=10")
            seen[len(seen)] = {"board": board, "board_reads": board_reads, "report": report, "reads": report_reads}
        older, _ = read(seen[1]["report"]["older"])

    short, long = seen[0], seen[1]
    # The dashboard: the same statements returning the same rows at 300 snapshots as at 30.
    assert long["board_reads"] == short["board_reads"]
    assert sum(n for _, n in long["board_reads"]) <= 5
    assert long["board"]["requests"] == 303
    history = [asyncio.run(_history_totals(path, sid)) for sid in ("long", "short")]
    expected = dashboard(history)
    expected["limited"] = False
    assert long["board"] == expected
    assert long["board"]["bytes_saved"] > 0 and long["board"]["delta_blocks"] == {"1": 301}

    # The inspector: ten snapshots and their events, whatever the length of the history.
    for table in ("snapshots", "events", "inferences"):
        assert _rows_from(long["reads"], table) == _rows_from(short["reads"], table), table
    assert _rows_from(long["reads"], "events") == 2 * 10
    report = long["report"]
    assert (report["snapshot_count"], report["window"]) == (300, {"first": 291, "last": 300, "limit": 10})
    assert [s["seq"] for s in report["snapshots"]] == list(range(291, 301))
    assert len(report["requests"]) == 10 and report["requests"][-1]["sent"] == [report["blocks"][-2]["id"]]
    assert report["requests"][-1]["context_blocks"] == 599
    assert report["older"] == "/api/sessions/long/inspect?before=291&limit=10"
    assert report["totals"]["requests"] == 10

    # Paging back: the ten snapshots before, with their own requests.
    assert older["window"] == {"first": 281, "last": 290, "limit": 10} and older["snapshot_count"] == 300
    assert [r["inference_id"] for r in older["requests"]] == [f"long-inference-{k}" for k in range(280, 290)]
    assert len(older["blocks"]) == 580  # the blocks of snapshot 290
    assert older["older"] == "/api/sessions/long/inspect?before=281&limit=10"


def test_the_dashboard_shows_what_the_whole_history_shows(geppetto_sim: Simulator, tmp_path: Path) -> None:
    """A session with a middleware edit and a fallback, and one without an event log (its requests are
    inferred from its latest snapshot)."""
    path = tmp_path / "s.db"
    report = asyncio.run(edited_session_report(geppetto_sim, path))

    async def unlogged() -> None:
        with open_store(str(path)) as store:
            async with geppetto_sim.engine("openai-responses") as engine:
                session = gp.Session(engine, store=store, session_id="s2")
                await session.run("one")
                await session.run("two")

    asyncio.run(unlogged())
    app = create_app(sim_profile(geppetto_sim), store=str(path))
    with running_app(app) as url, httpx.Client(base_url=url) as client:
        board = client.get("/api/dashboard").json()
        one = client.get("/api/dashboard?limit=1").json()
        inspected = client.get("/api/sessions/s1/inspect").json()
    history = [asyncio.run(_history_totals(path, sid)) for sid in ("s1", "s2")]
    assert history[1]["totals"]["requests"] == 2  # inferred: no events were recorded
    expected = dashboard(history)
    expected["limited"] = False
    assert board == expected
    assert board["fallback_reasons"] == {"fingerprint_mismatch": 1}
    assert (one["sessions"], one["limited"], one["per_session"][0]["session_id"]) == (1, True, "s2")
    # A session shorter than a page: the inspector shows all of it, as the whole-history report does.
    assert inspected["older"] is None and inspected["window"] == {"first": 1, "last": 3, "limit": 20}
    for key in ("requests", "snapshots", "blocks", "totals", "errors"):
        assert inspected[key] == report[key], key


def test_inspect_paging_takes_positive_numbers(geppetto_sim: Simulator, tmp_path: Path) -> None:
    path = tmp_path / "s.db"

    async def make() -> None:
        with open_store(str(path)) as store:
            await save_long_session(store, "s", 2)

    asyncio.run(make())
    app = create_app(sim_profile(geppetto_sim), store=str(path))
    with running_app(app) as url, httpx.Client(base_url=url) as client:
        for query in ("before=0", "limit=x", "before=-1"):
            bad = client.get(f"/api/sessions/s/inspect?{query}")
            assert bad.status_code == 422 and query.split("=")[0] in bad.json()["error"]["message"]
        past = client.get("/api/sessions/s/inspect?before=1").json()
        assert (past["requests"], past["snapshots"], past["window"], past["older"]) == ([], [], None, None)
        assert past["snapshot_count"] == 2
        report = session_report([])
        assert past["blocks"] == report["blocks"]
