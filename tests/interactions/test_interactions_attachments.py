"""Attached files on the Interactions engine: documents, audio and video go as the API's typed contents
(``document`` / ``audio`` / ``video`` with ``data`` or ``uri``; inline text as a framed ``text`` content),
every body validated against the google-genai types (``conftest``), the simulator's answer names what it
was given, a chained follow-up does not send them again; what the API cannot take is refused before sending,
and the simulator refuses the contents the service refuses."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from interactions_support import PATH, assert_server_holds_the_turn, creates, engine

from geppetto import Block, Turn, UsageError
from geppetto.simulator import Simulator

PDF = base64.b64encode(b"%PDF-1.4 tiny").decode()
TEXT = base64.b64encode(b"Paris is sunny.").decode()
WAV = base64.b64encode(b"RIFF....WAVE").decode()

CASES = [
    # the file, the content sent, what the simulator's answer mentions
    (
        {"media_type": "application/pdf", "data": PDF, "filename": "a.pdf"},
        {"type": "document", "data": PDF, "mime_type": "application/pdf"},
        "document (application/pdf, 13 bytes)",
    ),
    (
        {"media_type": "application/pdf", "url": "https://example.com/a.pdf"},
        {"type": "document", "uri": "https://example.com/a.pdf", "mime_type": "application/pdf"},
        "https://example.com/a.pdf (application/pdf)",
    ),
    (
        {"media_type": "audio/wav", "data": WAV, "filename": "hello.wav"},
        {"type": "audio", "data": WAV, "mime_type": "audio/wav"},
        "audio (audio/wav, 12 bytes)",
    ),
    (
        {"media_type": "audio/mpeg", "file_id": "files/song"},
        {
            "type": "audio",
            "uri": "https://generativelanguage.googleapis.com/v1beta/files/song",
            "mime_type": "audio/mpeg",
        },
        "https://generativelanguage.googleapis.com/v1beta/files/song (audio/mpeg)",
    ),
    (
        {"media_type": "video/mp4", "url": "gs://bucket/clip.mp4"},
        {"type": "video", "uri": "gs://bucket/clip.mp4", "mime_type": "video/mp4"},
        "gs://bucket/clip.mp4 (video/mp4)",
    ),
    (
        {"media_type": "text/plain", "data": TEXT, "filename": "notes.txt"},
        {
            "type": "text",
            "text": '-----BEGIN FILE name="notes.txt" type="text/plain"-----\nParis is sunny.\n-----END FILE-----',
        },
        'notes.txt (text/plain, 15 bytes): "Paris is sunny."',
    ),
]


@pytest.mark.parametrize(("file", "content", "mentioned"), CASES)
async def test_each_file_goes_as_its_content_type_and_reaches_the_simulator(
    geppetto_sim: Simulator, file: dict[str, Any], content: dict[str, Any], mentioned: str
) -> None:
    turn = await engine(geppetto_sim).run_inference(Turn(blocks=[Block.user("Summarize.", files=[file])]))
    assert creates(geppetto_sim)[-1]["input"][0]["content"] == [{"type": "text", "text": "Summarize."}, content]
    assert turn.blocks[-1].text == f"You said: Summarize. Attached: {mentioned}."


async def test_a_chained_follow_up_does_not_send_the_files_again(geppetto_sim: Simulator) -> None:
    eng = engine(geppetto_sim)
    pdf = {"media_type": "application/pdf", "data": PDF, "filename": "a.pdf"}
    image = {"media_type": "image/png", "data": "iVBORw0KGgo="}
    turn = Turn(blocks=[Block.user("Compare.", images=[image], files=[pdf])])
    turn = await eng.run_inference(turn)
    first = creates(geppetto_sim)[-1]["input"][0]["content"]
    assert [c["type"] for c in first] == ["text", "image", "document"], "text first, then images, then files"
    turn.append(Block.user("And the second page?"))
    turn = await eng.run_inference(turn)
    second = creates(geppetto_sim)[-1]
    assert second["previous_interaction_id"] and len(second["input"]) == 1
    assert second["input"][0]["content"] == [{"type": "text", "text": "And the second page?"}]
    assert_server_holds_the_turn(geppetto_sim, turn)


@pytest.mark.parametrize(
    ("file", "message"),
    [
        ({"media_type": "application/zip", "data": PDF, "filename": "a.zip"}, "The Interactions API cannot take"),
        ({"media_type": "text/plain", "url": "https://example.com/a.txt"}, "and text inline"),
    ],
)
async def test_what_the_api_cannot_take_is_refused_before_sending(
    geppetto_sim: Simulator, file: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError, match=message) as refused:
        await engine(geppetto_sim).run_inference(Turn(blocks=[Block.user("Read.", files=[file])]))
    assert "GeminiEngine" in str(refused.value)
    assert creates(geppetto_sim) == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"type": "document", "data": PDF}, "mime_type is required with inline data"),
        (
            {"type": "document", "data": PDF, "uri": "https://example.com/a.pdf", "mime_type": "application/pdf"},
            "exactly one of 'data' or 'uri'",
        ),
        ({"type": "audio", "data": "not base64!", "mime_type": "audio/wav"}, "Base64 decoding failed"),
        ({"type": "document", "data": TEXT, "mime_type": "text/plain"}, "unsupported mime type 'text/plain'"),
        ({"type": "video", "uri": "gs://b/c.mkv", "mime_type": "video/x-matroska"}, "for video content"),
    ],
)
def test_the_simulator_refuses_contents_the_service_refuses(
    geppetto_sim: Simulator, content: dict[str, Any], message: str
) -> None:
    body = {
        "model": "gemini-2.5-flash",
        "input": [{"type": "user_input", "content": [{"type": "text", "text": "Hi"}, content]}],
    }
    answer = httpx.post(f"{geppetto_sim.url}{PATH}", json=body, headers={"x-goog-api-key": "k"}, timeout=10)
    assert answer.status_code == 400, answer.text
    assert message in answer.json()["error"]["message"]
