"""Attachments through ``geppetto serve``: a prompt's ``files`` reach the engine (the simulator's answer names
them) and the store, as do ``useChat`` file parts; a bad one is refused with 422 before anything starts, and
a path is never read; the web chat's file input sends the chosen files with the prompt and shows them, live
and after a reload; ``geppetto serve --max-body`` takes larger ones, and the 413 says so."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import Worker, write_sim_profile
from test_server import events_of, new_session, server  # noqa: F401  (the server fixture)
from test_web import Page, browser, expect, page, send, served  # noqa: F401  (the browser fixtures)
from test_web import new_session as open_session

from geppetto.simulator import Simulator

PDF = base64.b64encode(b"%PDF-1.4 tiny").decode()


def test_a_prompt_with_files_reaches_the_engine_and_the_store(server: httpx.Client) -> None:  # noqa: F811
    sid = new_session(server)
    files = [{"media_type": "application/pdf", "data": PDF, "filename": "a.pdf"}]
    response = server.post(f"/api/sessions/{sid}/messages", json={"text": "Summarize.", "files": files})
    assert response.status_code == 202, response.text
    events = events_of(server, sid, response.json()["after"])
    assert events[-1]["data"]["status"] == "completed"
    text = "".join(e["data"]["delta"] for e in events if e["event"] == "text_delta")
    assert text == "You said: Summarize. Attached: a.pdf (application/pdf, 13 bytes)."
    turn = server.get(f"/api/sessions/{sid}").json()["latest"]
    assert turn["blocks"][0]["payload"]["files"] == files


def test_a_use_chat_file_part_is_attached_to_the_prompt(server: httpx.Client) -> None:  # noqa: F811
    part = {
        "type": "file",
        "mediaType": "application/pdf",
        "filename": "a.pdf",
        "url": f"data:application/pdf;base64,{PDF}",
    }
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Summarize."}, part]}
    response = server.post("/api/chat", json={"id": "chat-files", "messages": [message]})
    assert response.status_code == 200, response.text
    deltas = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")]
    text = "".join(d["delta"] for d in deltas if d["type"] == "text-delta")
    assert text == "You said: Summarize. Attached: a.pdf (application/pdf, 13 bytes)."
    stored = server.get("/api/sessions/chat-files").json()["latest"]["blocks"][0]["payload"]["files"]
    assert stored == [{"media_type": "application/pdf", "data": PDF, "filename": "a.pdf"}]
    bad = {**message, "parts": [{"type": "text", "text": "Hi"}, {"type": "file", "url": "https://x.test/a"}]}
    refused = server.post("/api/chat", json={"id": "chat-bad", "messages": [bad]})
    assert refused.status_code == 422 and "has no 'media_type'" in refused.json()["error"]["message"]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (["/etc/passwd"], "files is a list of {"),  # a path is never read by the server
        ({"media_type": "application/pdf"}, "files is a list of {"),
        ([{"data": PDF}], "has no 'media_type'"),
        ([{"media_type": "application/pdf", "data": PDF, "url": "https://x.test/a.pdf"}], "exactly one of"),
    ],
)
def test_bad_files_are_refused_before_anything_starts(
    server: httpx.Client,  # noqa: F811
    files: Any,
    message: str,
) -> None:
    sid = new_session(server)
    response = server.post(f"/api/sessions/{sid}/messages", json={"text": "Hi", "files": files})
    assert response.status_code == 422, response.text
    assert message in response.json()["error"]["message"]
    assert server.get(f"/api/sessions/{sid}").json()["latest"] is None  # nothing started, nothing saved


def test_the_web_chat_sends_chosen_files_with_the_prompt(served: str, page: Page) -> None:  # noqa: F811
    p = page.page
    open_session(p, served)
    p.set_input_files("#attach", files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"Paris is sunny."}])
    send(p, "Summarize.")
    assert p.locator("#messages .msg.user .attached").inner_text() == "Attached: notes.txt"
    answer = p.locator("#messages .msg.assistant").last.inner_text()
    assert 'Attached: notes.txt (text/plain, 15 bytes): "Paris is sunny."' in answer
    assert p.locator("#attach").evaluate("input => input.files.length") == 0  # sent once
    send(p, "Thanks.")
    assert "Attached" not in p.locator("#messages .msg.assistant").last.inner_text()
    page.shot("attached")
    p.reload()
    p.locator("#messages .msg.user .attached").wait_for()
    assert p.locator("#messages .msg.user .attached").all_inner_texts() == ["Attached: notes.txt"]
    expect(p.locator("#attach")).to_be_visible()


def test_serve_max_body_takes_larger_attachments_and_the_413_names_it(geppetto_sim: Simulator, tmp_path: Path) -> None:
    write_sim_profile(geppetto_sim)
    worker = Worker("--profile", "simtest", "--store", str(tmp_path / "s.db"), "--max-body", "4000")
    try:
        sid = httpx.post(worker.url + "/api/sessions", json={}).json()["id"]
        big = [{"media_type": "application/pdf", "data": base64.b64encode(b"%PDF" + b"0" * 3000).decode()}]
        refused = httpx.post(f"{worker.url}/api/sessions/{sid}/messages", json={"text": "Hi", "files": big})
        assert refused.status_code == 413
        message = refused.json()["error"]["message"]
        assert re.match(r"the request is 4 KiB \(4,0\d\d bytes\), over", message), message  # its size, then the limit
        assert "over this server's limit of 3.9 KiB (4,000 bytes)" in message
        assert message.endswith("restart the server with geppetto serve --max-body BYTES to take larger ones.")
        small = [{"media_type": "application/pdf", "data": PDF, "filename": "a.pdf"}]
        taken = httpx.post(f"{worker.url}/api/sessions/{sid}/messages", json={"text": "Hi", "files": small})
        assert taken.status_code == 202, taken.text
    finally:
        worker.stop()
