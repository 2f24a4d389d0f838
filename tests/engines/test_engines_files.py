"""Documents and audio in user blocks, by URL, inline bytes or a provider file id, on all four engines:
translated per provider, refused with the way out where a provider cannot take them, and accepted by
the simulator end to end."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from geppetto import Block, Turn, UsageError
from geppetto.providers.anthropic import build_request as claude_request
from geppetto.providers.gemini import build_request as gemini_request
from geppetto.providers.openai_chat import build_request as chat_request
from geppetto.providers.openai_responses._items import blocks_to_items
from geppetto.simulator import Simulator
from geppetto.turns import attach_files, file_attachment

PDF = base64.b64encode(b"%PDF-1.4 tiny").decode()
TEXT = base64.b64encode(b"Paris is sunny.").decode()
WAV = base64.b64encode(b"RIFF....WAVE").decode()


def _user(*files: dict[str, Any]) -> Block:
    block = Block.user("Summarize.")
    block.payload["files"] = list(files)
    return block


def _claude(block: Block) -> list[dict[str, Any]]:
    return claude_request(Turn(blocks=[block]), model="claude-sonnet-4-5", tools=[])["messages"][0]["content"]


def _gemini(block: Block) -> list[dict[str, Any]]:
    return gemini_request(Turn(blocks=[block]), tools=[])["contents"][0]["parts"]


def _chat(block: Block) -> Any:
    return chat_request(Turn(blocks=[block]), model="gpt-4o", tools=[])["messages"][0]["content"]


def _responses(block: Block) -> Any:
    return blocks_to_items([block])[0]["content"]


def test_a_pdf_inline_by_url_and_by_file_id_on_each_provider() -> None:
    inline = {"media_type": "application/pdf", "data": PDF, "filename": "a.pdf"}
    url = {"media_type": "application/pdf", "url": "https://example.com/a.pdf"}
    claude_id = {"media_type": "application/pdf", "file_id": "file_011"}
    assert _claude(_user(inline, url, claude_id)) == [
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
            "title": "a.pdf",
        },
        {"type": "document", "source": {"type": "url", "url": "https://example.com/a.pdf"}},
        {"type": "document", "source": {"type": "file", "file_id": "file_011"}},
        {"type": "text", "text": "Summarize."},
    ]
    gemini_id = {"media_type": "application/pdf", "file_id": "files/abc"}
    assert _gemini(_user(inline, url, gemini_id))[1:] == [
        {"inlineData": {"mimeType": "application/pdf", "data": PDF}},
        {"fileData": {"fileUri": "https://example.com/a.pdf", "mimeType": "application/pdf"}},
        {
            "fileData": {
                "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/abc",
                "mimeType": "application/pdf",
            }
        },
    ]
    openai_id = {"media_type": "application/pdf", "file_id": "file-abc"}
    assert _responses(_user(inline, url, openai_id))[1:] == [
        {"type": "input_file", "file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"},
        {"type": "input_file", "file_url": "https://example.com/a.pdf"},
        {"type": "input_file", "file_id": "file-abc"},
    ]
    assert _chat(_user(inline, openai_id))[1:] == [
        {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"}},
        {"type": "file", "file": {"file_id": "file-abc"}},
    ]


def test_plain_text_goes_to_claude_as_a_text_document() -> None:
    assert _claude(_user({"media_type": "text/plain", "data": TEXT}))[0] == {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "Paris is sunny."},
    }


def test_audio_goes_inline_to_chat_and_gemini() -> None:
    wav = {"media_type": "audio/wav", "data": WAV}
    assert _chat(_user(wav))[1] == {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}}
    assert _gemini(_user(wav, {"media_type": "audio/mpeg", "file_id": "files/song"}))[1:] == [
        {"inlineData": {"mimeType": "audio/wav", "data": WAV}},
        {
            "fileData": {
                "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/song",
                "mimeType": "audio/mpeg",
            }
        },
    ]


@pytest.mark.parametrize(
    ("build", "file", "message"),
    [
        (
            _claude,
            {"media_type": "audio/wav", "data": WAV},
            "Claude cannot take the audio .* inline: it takes no audio input",
        ),
        (_responses, {"media_type": "audio/wav", "data": WAV}, "The Responses API cannot take the audio .*ChatEngine"),
        (_chat, {"media_type": "audio/ogg", "data": WAV}, "takes audio inline as wav or mp3 data only"),
        (
            _chat,
            {"media_type": "application/pdf", "url": "https://x/a.pdf"},
            "by URL: .*download it first, or use ResponsesEngine",
        ),
        (
            _claude,
            {"media_type": "application/msword", "data": PDF, "filename": "a.doc"},
            "'a.doc' .* convert it first",
        ),
        (_claude, {"media_type": "text/plain", "url": "https://x/a.txt"}, "Claude cannot take the document .* by URL"),
        (_gemini, {"media_type": "image/png", "data": PDF}, "images go under images"),
        (_gemini, {"media_type": "application/pdf"}, "exactly one of 'url', 'data' \\(base64\\) or 'file_id'"),
        (_gemini, {"data": PDF}, "has no 'media_type'"),
    ],
)
def test_what_a_provider_cannot_take_is_refused_naming_the_way_out(
    build: Any, file: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        build(_user(file))


def test_file_attachment_reads_a_file_and_attach_files_puts_images_apart(tmp_path: Path) -> None:
    (tmp_path / "a.pdf").write_bytes(b"%PDF-1.4 tiny")
    (tmp_path / "p.png").write_bytes(b"\x89PNG")
    (tmp_path / "noext").write_bytes(b"?")
    block = attach_files(Block.user("x"), [file_attachment(tmp_path / "a.pdf"), file_attachment(tmp_path / "p.png")])
    assert block.payload["files"] == [{"media_type": "application/pdf", "data": PDF, "filename": "a.pdf"}]
    assert block.payload["images"] == [{"media_type": "image/png", "data": base64.b64encode(b"\x89PNG").decode()}]
    with pytest.raises(UsageError, match="cannot tell what 'noext' is"):
        file_attachment(tmp_path / "noext")
    with pytest.raises(UsageError, match="no such file"):
        file_attachment(tmp_path / "missing.pdf")


@pytest.mark.parametrize("provider", ["openai-responses", "openai-chat", "anthropic", "gemini"])
async def test_a_pdf_reaches_the_simulator_on_every_engine(provider: str, geppetto_sim: Simulator) -> None:
    block = _user({"media_type": "application/pdf", "data": PDF, "filename": "a.pdf"})
    async with geppetto_sim.engine(provider) as engine:
        turn = await engine.run_inference(Turn(blocks=[block]))
    assert turn.blocks[-1].text
    body = geppetto_sim.requests[-1].body
    assert PDF in str(body)
