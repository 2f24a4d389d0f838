"""A session's own settings under ``geppetto serve --temporal``, as the built-in runner honours them: its
``model`` and ``mode`` pick the engine its requests run on, and its ``system`` prompt, read from the store at
each prompt, may change between prompts."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from geppetto.simulator import serve

from .served import events, served

pytest.importorskip("httpx")
pytest.importorskip("fastapi", reason="the server extra is not installed")
pytest.importorskip("geppetto.durable.temporal")


def _posts(sim: Any) -> list[Any]:
    return [r for r in sim.requests if r.method == "POST" and r.path.endswith("/responses")]


def test_model_mode_and_a_changed_system_prompt(temporal_address: str, tmp_path: Path) -> None:
    sid = f"s-{uuid.uuid4()}"  # its own workflow on the shared dev server
    with serve() as sim, served(temporal_address, sim.openai_url, tmp_path) as (client, _queue, err):
        made = client.post(
            "/api/sessions", json={"id": sid, "model": "sim-other", "mode": "stateless", "system": "Be terse."}
        )
        assert made.status_code == 201, made.text
        first = client.post(f"/api/sessions/{sid}/messages", json={"text": "What is the weather in Paris?"}).json()
        finished = events(client, first["events"])[-1]["data"]
        assert finished["status"] == "completed", (finished, err)
        before = len(_posts(sim))
        # the session's settings change in the store; the next prompt runs on them, as with the built-in runner
        with sqlite3.connect(tmp_path / "sessions.db") as db:
            settings = {"model": "sim-other", "mode": "stateless", "system": "Be cheerful."}
            db.execute("UPDATE sessions SET settings = ? WHERE id = ?", (json.dumps(settings), sid))
        second = client.post(f"/api/sessions/{sid}/messages", json={"text": "Thanks"}).json()
        assert events(client, second["events"])[-1]["data"]["status"] == "completed"
        latest = client.get(f"/api/sessions/{sid}").json()["latest"]
    sent = _posts(sim)
    assert len(sent) == before + 1 and before == 2  # the tool loop's two requests, then the second prompt's
    assert all(p.body["model"] == "sim-other" for p in sent), [p.body["model"] for p in sent]
    assert all(not p.body.get("previous_response_id") for p in sent)  # stateless: nothing chains
    assert all("Be terse." in json.dumps(p.body) for p in sent[:2])
    assert "Be cheerful." in json.dumps(sent[2].body) and "Be terse." not in json.dumps(sent[2].body)
    assert latest["blocks"][0]["kind"] == "system" and latest["blocks"][0]["payload"]["text"] == "Be cheerful."
