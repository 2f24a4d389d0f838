"""Attachments end to end: every source each provider takes (inline, URL, file id; documents, text, audio)
goes through the real engines to the simulator, the bodies validate against the SDKs' request types, the
simulator's answer names what it was given, a session keeps them through a store round trip and a resend,
and what a provider or model cannot take is refused, by the engine or by the simulator as the service does.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx
import pytest
from conformance_support import check_sent

from geppetto import Block, Session, Turn, UsageError, load_turn, save_turn
from geppetto.session.stores import open_store
from geppetto.simulator import Simulator
from geppetto.turns import file_attachment
from geppetto.turns._files import attachments

PDF_BYTES = b"%PDF-1.4 tiny"
PDF = base64.b64encode(PDF_BYTES).decode()
TEXT = base64.b64encode(b"Paris is sunny.").decode()
WAV = base64.b64encode(b"RIFF....WAVE").decode()

INLINE_PDF = {"media_type": "application/pdf", "data": PDF, "filename": "a.pdf"}
INLINE_TEXT = {"media_type": "text/plain", "data": TEXT, "filename": "notes.txt"}
URL_PDF = {"media_type": "application/pdf", "url": "https://example.com/a.pdf"}
WAV_AUDIO = {"media_type": "audio/wav", "data": WAV, "filename": "hello.wav"}


async def _ask(sim: Simulator, provider: str, files: list[dict[str, Any]], model: str = "sim-1") -> str:
    """Send one user block with ``files`` through the real engine; check every body sent; the answer text."""
    async with sim.engine(provider, model=model) as engine:
        turn = await engine.run_inference(Turn(blocks=[Block.user("Summarize.", files=files)]))
    for request in sim.requests:
        check_sent(request.path, request.body)
    return turn.blocks[-1].text


CASES = [
    # provider, model, files, what the simulator's answer mentions
    ("openai-responses", "sim-1", [INLINE_PDF], ["a.pdf (application/pdf, 13 bytes)"]),
    ("openai-responses", "sim-1", [INLINE_TEXT], ['notes.txt (text/plain, 15 bytes): "Paris is sunny."']),
    ("openai-responses", "sim-1", [URL_PDF], ["https://example.com/a.pdf"]),
    ("openai-responses", "sim-1", [{"media_type": "application/pdf", "file_id": "file-abc"}], ["file file-abc"]),
    ("openai-chat", "sim-1", [INLINE_PDF], ["a.pdf (application/pdf, 13 bytes)"]),
    ("openai-chat", "sim-1", [{"media_type": "application/pdf", "file_id": "file-abc"}], ["file file-abc"]),
    ("openai-chat", "sim-1", [INLINE_TEXT], ['notes.txt (text/plain, 15 bytes): "Paris is sunny."']),
    ("openai-chat", "gpt-4o-audio-preview", [WAV_AUDIO], ["audio (audio/wav, 12 bytes)"]),
    ("anthropic", "sim-1", [INLINE_PDF], ["a.pdf (application/pdf, 13 bytes)"]),
    ("anthropic", "sim-1", [INLINE_TEXT], ['notes.txt (text/plain, 15 bytes): "Paris is sunny."']),
    ("anthropic", "sim-1", [URL_PDF], ["https://example.com/a.pdf"]),
    ("anthropic", "sim-1", [{"media_type": "application/pdf", "file_id": "file_011"}], ["document file_011"]),
    ("gemini", "sim-1", [INLINE_PDF], ["document (application/pdf, 13 bytes)"]),
    ("gemini", "sim-1", [URL_PDF], ["https://example.com/a.pdf (application/pdf)"]),
    (
        "gemini",
        "sim-1",
        [{"media_type": "audio/mpeg", "file_id": "files/song"}],
        ["https://generativelanguage.googleapis.com/v1beta/files/song (audio/mpeg)"],
    ),
    ("gemini", "sim-1", [WAV_AUDIO], ["audio (audio/wav, 12 bytes)"]),
]


@pytest.mark.parametrize(("provider", "model", "files", "mentioned"), CASES)
async def test_each_source_reaches_the_simulator_and_is_named_in_its_answer(
    geppetto_sim: Simulator, provider: str, model: str, files: list[dict[str, Any]], mentioned: list[str]
) -> None:
    answer = await _ask(geppetto_sim, provider, files, model)
    assert answer.startswith("You said: Summarize.")
    assert answer.endswith(f" Attached: {'; '.join(mentioned)}.")


async def test_chat_sends_a_text_file_as_framed_text(geppetto_sim: Simulator) -> None:
    answer = await _ask(geppetto_sim, "openai-chat", [INLINE_TEXT])
    parts = geppetto_sim.requests[-1].body["messages"][0]["content"]
    assert parts[1] == {
        "type": "text",
        "text": '-----BEGIN FILE name="notes.txt" type="text/plain"-----\nParis is sunny.\n-----END FILE-----',
    }
    assert "Paris is sunny." in answer


async def test_several_files_and_an_image_go_together_on_every_engine(geppetto_sim: Simulator) -> None:
    png = {"media_type": "image/png", "data": "iVBORw0KGgo="}
    for provider in ("openai-responses", "anthropic", "gemini", "openai-chat"):
        answer = await _ask(geppetto_sim, provider, [INLINE_PDF, png])
        assert "(application/pdf, 13 bytes)" in answer, (provider, answer)
        assert "(image/png, 8 bytes)" in answer, (provider, answer)


@pytest.mark.parametrize("provider", ["openai-responses", "openai-chat", "anthropic", "gemini", "gemini-interactions"])
async def test_a_session_keeps_its_attachments_through_a_store_and_sends_them_again(
    geppetto_sim: Simulator, provider: str, tmp_path: Path
) -> None:
    report = tmp_path / "report.pdf"
    report.write_bytes(PDF_BYTES)
    store = open_store(str(tmp_path / "sessions.db"))
    try:
        async with geppetto_sim.engine(
            provider, **({"mode": "stateless"} if provider in ("openai-responses", "gemini-interactions") else {})
        ) as engine:
            session = Session(engine, store=store)
            first = await session.run("Summarize.", files=[report])
            assert first.blocks[-1].text.endswith("(application/pdf, 13 bytes).")
            loaded = await store.load_latest(session.session_id)
            assert loaded is not None
            assert loaded.blocks[0].payload["files"] == [
                {"media_type": "application/pdf", "data": PDF, "filename": "report.pdf"}
            ]
            resumed = Session(engine, store=store, session_id=session.session_id)
            resumed.append(loaded)
            await resumed.run("And again?")
    finally:
        store.close()
    resent = geppetto_sim.requests[-1].body
    check_sent(geppetto_sim.requests[-1].path, resent)
    assert PDF in str(resent)  # the stored attachment went out again with the whole conversation


def test_block_user_reads_paths_and_sorts_images_from_files(tmp_path: Path) -> None:
    (tmp_path / "a.pdf").write_bytes(PDF_BYTES)
    (tmp_path / "p.png").write_bytes(b"\x89PNG")
    block = Block.user("x", files=[tmp_path / "a.pdf", str(tmp_path / "p.png"), URL_PDF])
    assert block.payload["files"] == [{"media_type": "application/pdf", "data": PDF, "filename": "a.pdf"}, URL_PDF]
    assert block.payload["images"] == [{"media_type": "image/png", "data": base64.b64encode(b"\x89PNG").decode()}]
    save_turn(tmp_path / "turn.yaml", Turn(blocks=[block]))
    assert load_turn(tmp_path / "turn.yaml").blocks[0].payload == block.payload


def test_bad_attachments_are_refused_naming_the_fix(tmp_path: Path) -> None:
    big = tmp_path / "big.pdf"
    big.write_bytes(b"%PDF" + b"0" * 100)
    with pytest.raises(UsageError, match=r"104 bytes is more than the 64 bytes sent inline; upload it .* file_id"):
        file_attachment(big, max_bytes=64)
    with pytest.raises(UsageError, match="an attachment is a path or a dict"):
        attachments([42])
    with pytest.raises(UsageError, match="no such file"):
        Block.user("x", files=[tmp_path / "missing.pdf"])
    with pytest.raises(UsageError, match="it is a folder; attach the files in it one by one"):
        Block.user("x", files=[tmp_path])


async def test_a_session_prompt_with_a_bad_file_leaves_the_history_alone(geppetto_sim: Simulator) -> None:
    async with geppetto_sim.engine("anthropic") as engine:
        session = Session(engine)
        with pytest.raises(UsageError, match="no such file"):
            session.prompt("Hi", files=["/nonexistent/a.pdf"])
        assert session.latest is None


async def test_chat_refuses_inline_files_other_than_pdf_and_text(geppetto_sim: Simulator) -> None:
    doc = {"media_type": "application/msword", "data": PDF, "filename": "a.doc"}
    with pytest.raises(
        UsageError, match=r"'a.doc' .* PDFs only .*convert it to PDF, pass a file_id, or use ResponsesEngine"
    ):
        await _ask(geppetto_sim, "openai-chat", [doc])
    assert geppetto_sim.requests == []


# -- the simulator refuses what the services refuse ----------------------------------------------------
def _post(sim: Simulator, path: str, body: dict[str, Any], *, openai: bool) -> httpx.Response:
    base = sim.openai_url if openai else sim.url
    headers = {"authorization": "Bearer sk-sim", "x-api-key": "sk-sim", "x-goog-api-key": "sk-sim"}
    return httpx.post(f"{base.rstrip('/')}/{path}", json=body, headers=headers, timeout=10)


def _message(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    return str(error["message"])


def _chat_body(part: dict[str, Any], model: str = "gpt-4o") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}, part]}]}


@pytest.mark.parametrize(
    ("part", "model", "message"),
    [
        (
            {"type": "file", "file": {"file_data": f"data:text/plain;base64,{TEXT}", "filename": "n.txt"}},
            "gpt-4o",
            "Expected a base64-encoded data URL with an application/pdf MIME type .* unsupported MIME type 'text/plain'",
        ),
        (
            {"type": "file", "file": {"file_data": PDF, "filename": "a.pdf"}},
            "gpt-4o",
            "'messages\\[0\\].content\\[1\\].file.file_data'.* an invalid base64-encoded value",
        ),
        ({"type": "file", "file": {"filename": "a.pdf"}}, "gpt-4o", "Missing required parameter"),
        (
            {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
            "gpt-4o",
            "input_audio is only supported by audio models",
        ),
        (
            {"type": "input_audio", "input_audio": {"data": "not base64!", "format": "wav"}},
            "gpt-4o-audio-preview",
            "expected base64-encoded audio",
        ),
    ],
)
def test_the_simulator_refuses_chat_file_parts_the_service_refuses(
    geppetto_sim: Simulator, part: dict[str, Any], model: str, message: str
) -> None:
    import re

    text = _message(_post(geppetto_sim, "chat/completions", _chat_body(part, model), openai=True))
    assert re.search(message, text), text


@pytest.mark.parametrize(
    ("part", "message"),
    [
        ({"type": "input_file", "filename": "a.pdf"}, "provide exactly one of 'file_id', 'file_url' or 'file_data'"),
        ({"type": "input_file", "file_id": "file-1", "file_url": "https://x.test/a.pdf"}, "got file_id, file_url"),
        ({"type": "input_file", "file_data": PDF, "filename": "a.pdf"}, "expected a base64-encoded data URL"),
        (
            {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
            "Invalid value: 'input_audio'. Supported values are: 'input_text', 'input_image', and 'input_file'.",
        ),
    ],
)
def test_the_simulator_refuses_responses_file_parts_the_service_refuses(
    geppetto_sim: Simulator, part: dict[str, Any], message: str
) -> None:
    body = {"model": "gpt-4.1", "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}, part]}]}
    assert message in _message(_post(geppetto_sim, "responses", body, openai=True))


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (
            {"type": "document", "source": {"type": "base64", "media_type": "application/msword", "data": PDF}},
            "messages.0.content.0.document.source.base64.media_type: Input should be 'application/pdf'",
        ),
        (
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": TEXT}},
            "messages.0.content.0.pdf.source.base64.data: The PDF specified was not valid.",
        ),
        (
            {"type": "document", "source": {"type": "url"}},
            "messages.0.content.0.document.source.url.url: Field required",
        ),
        (
            {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": PDF}},
            "messages.0.content.0.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', "
            "'image/gif' or 'image/webp'",
        ),
        (
            {"type": "input_audio", "source": {}},
            "messages.0.content.0: Input tag 'input_audio' found using 'type' does not match any of the expected tags",
        ),
    ],
)
def test_the_simulator_refuses_claude_blocks_the_service_refuses(
    geppetto_sim: Simulator, block: dict[str, Any], message: str
) -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [block, {"type": "text", "text": "Hi"}]}],
    }
    assert message in _message(_post(geppetto_sim, "v1/messages", body, openai=False))


@pytest.mark.parametrize(
    ("part", "message"),
    [
        ({"inlineData": {"data": PDF}}, "contents[0].parts[1].inline_data.mime_type: mime_type is required"),
        (
            {"inlineData": {"mimeType": "application/pdf", "data": "not base64!"}},
            "Invalid value at 'contents[0].parts[1].inline_data.data' (TYPE_BYTES), Base64 decoding failed",
        ),
        (
            {"fileData": {"mimeType": "application/pdf"}},
            "contents[0].parts[1].file_data.file_uri: file_uri is required",
        ),
    ],
)
def test_the_simulator_refuses_gemini_parts_the_service_refuses(
    geppetto_sim: Simulator, part: dict[str, Any], message: str
) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "Hi"}, part]}]}
    assert message in _message(
        _post(geppetto_sim, "v1beta/models/gemini-2.5-flash:generateContent", body, openai=False)
    )


async def test_claude_file_ids_send_the_files_beta_beside_the_engines_own(geppetto_sim: Simulator) -> None:
    file_id = {"media_type": "application/pdf", "file_id": "file_011"}
    async with geppetto_sim.engine("anthropic", headers={"anthropic-beta": "web-fetch-2025-09-10"}) as engine:
        await engine.run_inference(Turn(blocks=[Block.user("Summarize.")]))
        await engine.run_inference(Turn(blocks=[Block.user("Summarize.", files=[file_id])]))
    plain, with_file = geppetto_sim.requests
    assert plain.headers["anthropic-beta"] == "web-fetch-2025-09-10"  # no file: the engine's betas alone
    assert with_file.headers["anthropic-beta"] == "web-fetch-2025-09-10,files-api-2025-04-14"


def test_the_simulator_refuses_a_claude_file_source_without_the_files_beta(geppetto_sim: Simulator) -> None:
    block = {"type": "document", "source": {"type": "file", "file_id": "file_011"}}
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": [block]}]}
    assert _message(_post(geppetto_sim, "v1/messages", body, openai=False)) == (
        "messages.0.content.0.document.source: Input tag 'file' found using 'type' does not match any of the "
        "expected tags: 'base64', 'text', 'url', 'content'"
    )


@pytest.mark.parametrize("provider", ["openai-responses", "openai-chat", "anthropic", "gemini", "gemini-interactions"])
async def test_a_tool_loop_with_an_attachment_runs_and_resends_it(geppetto_sim: Simulator, provider: str) -> None:
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return f"{city}: 18C and sunny"

    async with geppetto_sim.engine(provider) as engine:
        session = Session(engine, tools=[get_weather])
        turn = await session.run("What is the weather in Paris?", files=[INLINE_PDF])
    assert turn.blocks[-1].text == "Here is what the tools returned. get_weather: Paris: 18C and sunny."
    assert len(geppetto_sim.requests) == 2
    for request in geppetto_sim.requests:
        check_sent(request.path, request.body)
    if provider not in ("openai-responses", "gemini-interactions"):  # chained: the second carries the result only
        assert PDF in str(geppetto_sim.requests[-1].body)
