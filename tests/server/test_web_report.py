"""What the inspector and the dashboard show, checked against what the simulator received; the
self-contained page of ``geppetto inspect --html``."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
from server_support import edited_session_report, input_bytes, model_calls, running_app, sim_profile

import geppetto as gp
from geppetto.server import create_app
from geppetto.session.stores import open_store
from geppetto.simulator import Reply, Simulator
from geppetto.turns import BLOCK_META_RESPONSE_ID, TURN_META_INFERENCE_ID, Block, Turn, save_turn
from geppetto.web import dashboard, session_report, standalone_html
from geppetto.web._report import snapshot_diff


async def test_a_session_with_a_middleware_edit_and_a_fallback(geppetto_sim: Simulator, tmp_path: Path) -> None:
    report = await edited_session_report(geppetto_sim, tmp_path / "s.db")

    sent = model_calls(geppetto_sim)
    requests = report["requests"]
    assert [(r["mode"], r["anchor"], r["fallback"]) for r in requests] == [
        ("stateless", None, None),
        ("chained", sent[1]["previous_response_id"], None),
        ("stateless", None, "fingerprint_mismatch"),
    ]
    assert "previous_response_id" not in sent[2]
    assert [r["input_bytes"] for r in requests] == [input_bytes(b) for b in sent]
    assert [len(r["sent"]) for r in requests] == [len(b["input"]) for b in sent]
    assert requests[2]["fallback_detail"].startswith("no valid anchor")
    # the stateless equivalent of a whole-Turn request is that request
    assert requests[2]["stateless_bytes"] == requests[2]["input_bytes"]
    assert requests[1]["stateless_bytes"] > requests[1]["input_bytes"]

    [edit] = report["snapshots"][2]["changes"]
    assert (edit["op"], edit["kind"], edit["before"], edit["after"], edit["middleware"]) == (
        "edit",
        "system",
        "be terse",
        "be verbose",
        "system_prompt",
    )
    assert report["snapshots"][0]["changes"] == [] and report["snapshots"][1]["changes"] == []

    totals = report["totals"]
    assert (totals["requests"], totals["chained"], totals["stateless"], totals["fallbacks"]) == (3, 1, 1, 1)
    assert totals["fallback_reasons"] == {"fingerprint_mismatch": 1}
    assert totals["bytes_saved"] == requests[1]["stateless_bytes"] - requests[1]["input_bytes"]

    both = dashboard([report, report])
    assert (both["sessions"], both["requests"], both["fallbacks"]) == (2, 6, 2)
    assert both["bytes_saved"] == 2 * totals["bytes_saved"]
    assert both["fallback_reasons"] == {"fingerprint_mismatch": 2}


async def test_an_expired_anchor_counts_as_a_rejection(geppetto_sim: Simulator, tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "s.db"))
    async with geppetto_sim.engine("openai-responses") as engine:
        session = gp.Session(engine, store=store, session_id="s2", record_events=True)
        first = await session.run("Hello")
        geppetto_sim.fail_next(forget=str(BLOCK_META_RESPONSE_ID.get(first.blocks[-1].metadata)))
        await session.run("Again")
    report = session_report(await store.load_session("s2"), await store.load_events("s2"), session_id="s2")
    store.close()
    # the engine sent a chained request, the API refused it, the engine resent the whole Turn
    assert [r["fallback"] for r in report["requests"]] == [None, "previous_response_not_found"]
    assert report["totals"]["rejections"] == 1
    assert report["totals"]["rejection_types"] == {"previous_response_not_found": 1}


def test_snapshot_diffs_show_inserts_removals_and_moves() -> None:
    a, b, c = Block.user("a"), Block.llm_text("b"), Block.user("c")
    before = Turn(blocks=[a, b, c])
    inserted = Block.system("note")
    after = Turn(blocks=[inserted, c, a])
    TURN_META_INFERENCE_ID.set(after.metadata, "inference-2")  # blocks of other inferences are edits
    changes = snapshot_diff(before, after)
    ops = {ch["op"]: ch for ch in changes}
    assert ops["insert"]["id"] == inserted.id and ops["insert"]["after"] == "note"
    assert ops["remove"]["id"] == b.id and ops["remove"]["before"] == "b"
    assert ops["move"]["before"] == [a.id, c.id] and ops["move"]["after"] == [c.id, a.id]
    assert snapshot_diff(before, Turn(blocks=[a, b, c])) == []


async def test_a_turn_file_alone_gives_the_anchors_the_engine_used(geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    async with geppetto_sim.engine("openai-responses") as engine:
        session = gp.Session(engine)
        for text in ("first", "second", "third"):
            turn = await session.run(text)
    report = session_report([turn])
    sent = model_calls(geppetto_sim)
    assert all(r["inferred"] for r in report["requests"])
    assert [r["anchor"] for r in report["requests"]] == [b.get("previous_response_id") for b in sent]
    assert [r["input_bytes"] for r in report["requests"]] == [input_bytes(b) for b in sent]


def test_inspect_html_writes_one_page_with_the_data_escaped(geppetto_sim: Simulator, tmp_path: Path) -> None:
    async def conversation() -> Turn:
        async with geppetto_sim.engine("openai-responses") as engine:
            return await gp.Session(engine).run("</script><script>alert(1)</script>")

    turn = asyncio.run(conversation())
    source = save_turn(tmp_path / "turn.yaml", turn)
    out = tmp_path / "page.html"
    done = subprocess.run(
        [sys.executable, "-m", "geppetto", "inspect", str(source), "--html", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert page.count("<script") == 2  # the data and the app: the block text does not add one
    assert "</script><script>alert" not in page
    data = re.search(r'<script type="application/json" id="geppetto-report">(.*?)</script>', page, re.S)
    assert data is not None
    assert json.loads(data.group(1))["blocks"][0]["text"] == "</script><script>alert(1)</script>"
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")  # nothing loaded from elsewhere
    # an unwritable target is a clean error
    done = subprocess.run(
        [sys.executable, "-m", "geppetto", "inspect", str(source), "--html", str(tmp_path / "no" / "page.html")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1


def test_the_standalone_page_escapes_the_title() -> None:
    page = standalone_html(session_report([Turn(blocks=[Block.user("x")])]), title="<b>t</b>")
    assert "<title>&lt;b&gt;t&lt;/b&gt;</title>" in page


def test_the_pages_are_served_with_a_strict_policy(geppetto_sim: Simulator, tmp_path: Path) -> None:
    app = create_app(sim_profile(geppetto_sim), store=str(tmp_path / "s.db"), api_key="k")
    with running_app(app) as url, httpx.Client(base_url=url) as client:
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert "unsafe-inline" not in page.headers["content-security-policy"]
        assert client.get("/ui/app.js").headers["content-type"].startswith("text/javascript")
        missing = client.get("/ui/other.js")
        assert missing.status_code == 404 and "app.js" in missing.json()["error"]["message"]
        # the pages are open; what they read needs the key
        assert client.get("/api/info").status_code == 401
        auth = {"authorization": "Bearer k"}
        info = client.get("/api/info", headers=auth).json()
        assert (info["provider"], info["model"]) == ("openai", "sim-1")
        assert client.get("/api/sessions/nope/inspect", headers=auth).status_code == 404
        bad = client.get("/api/dashboard?limit=0", headers=auth)
        assert bad.status_code == 422 and "limit" in bad.json()["error"]["message"]
        empty = client.get("/api/dashboard", headers=auth).json()
        assert (empty["sessions"], empty["requests"], empty["per_session"]) == (0, 0, [])


def test_the_front_end_never_writes_html() -> None:
    """Model and tool text reaches the page through text nodes only: no HTML sink in the script."""
    from geppetto.web import asset

    script = asset("app.js").decode()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script.replace("never assigns HTML", "")
