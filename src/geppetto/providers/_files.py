"""Attached files (documents, audio) as each provider takes them, refused where a provider cannot.

See :mod:`geppetto.turns._files` for the attachment shape. What goes where:

| | Responses | Chat Completions | Claude | Gemini |
|---|---|---|---|---|
| document, inline | ``input_file.file_data`` | ``file.file_data`` | ``document`` base64 (PDF) / text (``text/*``) | ``inlineData`` |
| document, URL | ``input_file.file_url`` | refused | ``document`` url (PDF) | ``fileData`` |
| document, file id | ``input_file.file_id`` | ``file.file_id`` | ``document`` file | ``fileData`` |
| audio, inline | refused | ``input_audio`` (wav, mp3) | refused | ``inlineData`` |
| audio, URL / file id | refused | refused | refused | ``fileData`` |
"""

from __future__ import annotations

import base64
from typing import Any

from .._exceptions import UsageError
from ..turns import Block
from ..turns._files import FileRef, file_refs

__all__ = ["chat_file_parts", "claude_file_blocks", "gemini_file_parts", "responses_file_parts"]

GEMINI_FILES = "https://generativelanguage.googleapis.com/v1beta/"
"""Where a Gemini file id (``files/abc``) lives, as the ``fileUri`` Gemini takes."""


def _refuse(file: FileRef, provider: str, instead: str) -> UsageError:
    name = f" {file.filename!r}" if file.filename else ""
    how = {"url": "by URL", "data": "inline", "file_id": "by file id"}[file.source]
    return UsageError(f"{provider} cannot take the {file.kind}{name} ({file.media_type}) {how}: {instead}")


def _files(block: Block) -> list[FileRef]:
    files = file_refs(block)
    for file in files:
        if file.kind == "image":
            raise UsageError(
                f"the image {file.filename or file.media_type!r} is under the user block's files; images go under "
                "images (Block.user(text, images=[...]), or geppetto.turns.attach_files puts each where it belongs)"
            )
    return files


def responses_file_parts(block: Block) -> list[dict[str, Any]]:
    """``input_file`` parts for the OpenAI Responses API."""
    out: list[dict[str, Any]] = []
    for file in _files(block):
        if file.kind == "audio":
            raise _refuse(
                file,
                "The Responses API",
                "it takes no audio input; use ChatEngine with an audio model, or GeminiEngine",
            )
        part: dict[str, Any] = {"type": "input_file"}
        if file.source == "file_id":
            part["file_id"] = file.value
        elif file.source == "url":
            part["file_url"] = file.value
        else:
            part["file_data"] = file.data_url
            part["filename"] = file.filename or "file"
        out.append(part)
    return out


def chat_file_parts(block: Block) -> list[dict[str, Any]]:
    """``file`` and ``input_audio`` content parts for Chat Completions."""
    out: list[dict[str, Any]] = []
    for file in _files(block):
        if file.kind == "audio":
            if file.source != "data" or not file.audio_format:
                raise _refuse(file, "Chat Completions", "it takes audio inline as wav or mp3 data only")
            out.append({"type": "input_audio", "input_audio": {"data": file.value, "format": file.audio_format}})
        elif file.source == "url":
            raise _refuse(
                file,
                "Chat Completions",
                "it takes files inline or by file id; download it first, or use ResponsesEngine",
            )
        elif file.source == "file_id":
            out.append({"type": "file", "file": {"file_id": file.value}})
        else:
            out.append({"type": "file", "file": {"file_data": file.data_url, "filename": file.filename or "file"}})
    return out


def _claude_source(file: FileRef) -> dict[str, Any]:
    if file.source == "file_id":
        return {"type": "file", "file_id": file.value}
    if file.media_type == "application/pdf":
        if file.source == "url":
            return {"type": "url", "url": file.value}
        return {"type": "base64", "media_type": "application/pdf", "data": file.value}
    if file.media_type.startswith("text/") and file.source == "data":
        try:
            text = base64.b64decode(file.value, validate=True).decode("utf-8")
        except ValueError as exc:
            raise _refuse(file, "Claude", "its data is not base64 of UTF-8 text") from exc
        return {"type": "text", "media_type": "text/plain", "data": text}
    raise _refuse(
        file, "Claude", "it reads PDFs (inline, by URL or file id) and plain text (inline or file id); convert it first"
    )


def claude_file_blocks(block: Block) -> list[dict[str, Any]]:
    """``document`` content blocks for Claude."""
    out: list[dict[str, Any]] = []
    for file in _files(block):
        if file.kind == "audio":
            raise _refuse(file, "Claude", "it takes no audio input; transcribe it first, or use GeminiEngine")
        document: dict[str, Any] = {"type": "document", "source": _claude_source(file)}
        if file.filename:
            document["title"] = file.filename
        out.append(document)
    return out


def gemini_file_parts(block: Block) -> list[dict[str, Any]]:
    """``inlineData`` / ``fileData`` parts for Gemini (documents and audio alike)."""
    out: list[dict[str, Any]] = []
    for file in _files(block):
        if file.source == "data":
            out.append({"inlineData": {"mimeType": file.media_type, "data": file.value}})
            continue
        uri = file.value
        if file.source == "file_id" and not uri.startswith(("http://", "https://", "gs://")):
            uri = GEMINI_FILES + uri
        out.append({"fileData": {"fileUri": uri, "mimeType": file.media_type}})
    return out
