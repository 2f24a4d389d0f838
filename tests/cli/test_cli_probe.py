"""``geppetto probe`` through the real console script, against the simulator (faithful, and one that forgets)."""

from __future__ import annotations

import json
from pathlib import Path

from _cli_helpers import geppetto

import geppetto as gp
from geppetto.providers.openai_responses import ResponsesEngine, Verdict
from geppetto.session.stores import open_store
from geppetto.simulator import Simulator, serve

KEYS = {"previous_response_id", "echo", "conversations", "input_tokens", "compact", "store_default", "background"}


def test_probe_json_says_what_the_simulator_keeps(geppetto_sim: Simulator, tmp_path: Path) -> None:
    res = geppetto(
        "probe", geppetto_sim.openai_url, "--model", "sim-1", "--json", config_dir=tmp_path, OPENAI_API_KEY="unused"
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data.keys() >= KEYS
    assert data["previous_response_id"] == "kept" and data["echo"] is True and data["evidence"] == "echo"
    assert data["conversations"] is data["input_tokens"] is data["compact"] is True


def test_probe_table_on_a_server_that_forgets_and_its_saved_verdict(tmp_path: Path) -> None:
    saved = tmp_path / "probe.json"
    with serve(quirks=["forgets", "no-conversations"]) as sim:
        res = geppetto(
            "probe",
            sim.openai_url,
            "--model",
            "sim-1",
            "--api-key-env",
            "PEER_KEY",
            "--save",
            str(saved),
            config_dir=tmp_path,
            PEER_KEY="unused",
        )
    assert res.returncode == 0, res.stderr
    assert "ignored: accepted, but the answer comes from the new input alone" in res.stdout
    assert "POST /conversations" in res.stdout and "note: POST /conversations: 404" in res.stdout
    assert f"saved to {saved}" in res.stdout
    verdict = Verdict.from_dict(json.loads(saved.read_text()))
    assert verdict.ignored and verdict.evidence == "usage" and verdict.conversations is False


def test_probe_without_a_key_names_the_variable(geppetto_sim: Simulator, tmp_path: Path) -> None:
    res = geppetto("probe", geppetto_sim.openai_url, "--model", "sim-1", config_dir=tmp_path)
    assert res.returncode == 2
    assert "no API key: set OPENAI_API_KEY or pass --api-key-env NAME" in res.stderr
    assert "any value will do (OPENAI_API_KEY=unused)" in res.stderr
    res = geppetto("probe", geppetto_sim.openai_url, "--model", "sim-1", "--api-key-env", "MY_KEY", config_dir=tmp_path)
    assert res.returncode == 2 and "no API key: set MY_KEY;" in res.stderr


def test_probe_of_an_endpoint_that_does_not_answer_says_so(tmp_path: Path) -> None:
    res = geppetto("probe", "http://127.0.0.1:9/v1", "--model", "m", config_dir=tmp_path, OPENAI_API_KEY="unused")
    assert res.returncode == 1
    assert res.stderr.startswith("error: ") and "could not reach http://127.0.0.1:9/v1/responses" in res.stderr
    assert res.stdout == ""


def test_probe_needs_a_model(geppetto_sim: Simulator, tmp_path: Path) -> None:
    res = geppetto("probe", geppetto_sim.openai_url, config_dir=tmp_path, OPENAI_API_KEY="unused")
    assert res.returncode == 2 and "missing option '--model'" in res.stderr


async def test_probe_remember_keeps_the_verdict_where_sessions_read_it(tmp_path: Path) -> None:
    target = tmp_path / "sessions.db"
    with serve(quirks=["forgets"]) as sim:
        res = geppetto(
            "probe",
            sim.openai_url,
            "--model",
            "sim-1",
            "--remember",
            "--store",
            str(target),
            config_dir=tmp_path,
            OPENAI_API_KEY="unused",
        )
        assert res.returncode == 0, res.stderr
        assert f"the verdict is kept in the session store {target}" in res.stdout
        sim.reset()
        with open_store(target) as store:
            saved = await store.load_endpoint_verdict(sim.openai_url, "sim-1")
            assert saved is not None and saved["previous_response_id"] == "ignored"
            assert saved["evidence"] == "probe" and saved["detail"].startswith("geppetto probe, usage: ")
            # a session on that store starts stateless: no chained request is tried on this endpoint
            engine = ResponsesEngine("sim-1", api_key="unused", base_url=sim.openai_url, mode="chained")
            session = gp.Session(engine, store=store)
            for i in range(3):
                await session.run(f"prompt {i}")
        posts = [r.body for r in sim.requests if r.path == "/v1/responses"]
    assert [len(p["input"]) for p in posts] == [1, 3, 5]
    assert not any("previous_response_id" in p for p in posts)
