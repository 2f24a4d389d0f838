"""Attached files (documents, audio) as each provider takes them, refused where a provider cannot.

See :mod:`geppetto.turns._files` for the attachment shape. What goes where:

| | Responses | Chat Completions | Claude | Gemini |
|---|---|---|---|---|
| document, inline | ``input_file.file_data`` | ``file.file_data`` (PDF), text part (``text/*``) | ``document`` base64 (PDF) / text (``text/*``) | ``inlineData`` |
| document, URL | ``input_file.file_url`` | refused | ``document`` url (PDF) | ``fileData`` |
| document, file id | ``input_file.file_id`` | ``file.file_id`` | ``document`` file | ``fileData`` |
| audio, inline | refused | ``input_audio`` (wav, mp3) | refused | ``inlineData`` |
| audio, URL / file id | refused | refused | refused | ``fileData`` |

Gemini's Interactions API takes typed contents instead (:func:`interactions_file_contents`): ``document``
(its document types), ``audio``, ``video``, each with ``data`` or ``uri``; inline text goes as a framed
``text`` content, as on Chat Completions.
"""

from __future__ import annotations

import base64
from typing import Any

from .._exceptions import UsageError
from ..turns import Block, FileRef, file_refs

__all__ = [
    "chat_file_parts",
    "claude_file_blocks",
    "claude_files_beta",
    "gemini_file_parts",
    "interactions_file_contents",
    "responses_file_parts",
]

CLAUDE_FILES_BETA = "files-api-2025-04-14"
"""The beta Claude's ``file`` sources (Anthropic's Files API) need in the ``anthropic-beta`` header."""

GEMINI_FILES = "https://generativelanguage.googleapis.com/v1beta/"
"""Where a Gemini file id (``files/abc``) lives, as the ``fileUri`` Gemini takes."""

INTERACTIONS_DOCUMENTS = frozenset(
    {
        "application/pdf",
        "text/csv",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.ms-powerpoint",
        "application/vnd.oasis.opendocument.presentation",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/msword",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.template",
        "application/vnd.oasis.opendocument.text",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "application/vnd.ms-excel",
        "application/vnd.oasis.opendocument.spreadsheet",
    }
)
"""The media types of the Interactions API's ``document`` content (PDF, CSV, Office and OpenDocument)."""
INTERACTIONS_AUDIO = frozenset(
    f"audio/{t}"
    for t in ["wav", "mp3", "aiff", "aac", "ogg", "flac", "mpeg", "m4a", "l16", "opus", "alaw", "mulaw", "webm"]
)
"""The media types of its ``audio`` content."""
INTERACTIONS_VIDEO = frozenset(
    f"video/{t}" for t in ["mp4", "mpeg", "mpg", "mov", "avi", "x-flv", "webm", "wmv", "3gpp"]
)
"""The media types of its ``video`` content."""


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
        elif file.media_type == "application/pdf":
            out.append({"type": "file", "file": {"file_data": file.data_url, "filename": file.filename or "file.pdf"}})
        elif file.media_type.startswith("text/"):
            out.append({"type": "text", "text": _framed_text(file, "Chat Completions")})
        else:
            raise _refuse(
                file,
                "Chat Completions",
                "it reads inline files as PDFs only (and text, which goes as text); convert it to PDF, "
                "pass a file_id, or use ResponsesEngine",
            )
    return out


def _decoded_text(file: FileRef, provider: str) -> str:
    try:
        return base64.b64decode(file.value, validate=True).decode("utf-8")
    except ValueError as exc:
        raise _refuse(file, provider, "its data is not base64 of UTF-8 text") from exc


def _framed_text(file: FileRef, provider: str) -> str:
    """A text file inline as a text part, framed with its name and type so the model tells it from the prompt."""
    name = f' name="{file.filename}"' if file.filename else ""
    return f'-----BEGIN FILE{name} type="{file.media_type}"-----\n{_decoded_text(file, provider)}\n-----END FILE-----'


def _claude_source(file: FileRef) -> dict[str, Any]:
    if file.source == "file_id":
        return {"type": "file", "file_id": file.value}
    if file.media_type == "application/pdf":
        if file.source == "url":
            return {"type": "url", "url": file.value}
        return {"type": "base64", "media_type": "application/pdf", "data": file.value}
    if file.media_type.startswith("text/") and file.source == "data":
        return {"type": "text", "media_type": "text/plain", "data": _decoded_text(file, "Claude")}
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


def claude_files_beta(body: dict[str, Any], headers: dict[str, str]) -> dict[str, str]:
    """The ``anthropic-beta`` header a Claude body needs when it refers to uploaded files (``file``
    sources), the engine's own betas kept; nothing when it has none or the beta is there already."""
    blocks = [b for m in body.get("messages") or [] if isinstance(m.get("content"), list) for b in m["content"]]
    if not any(isinstance(b.get("source"), dict) and b["source"].get("type") == "file" for b in blocks):
        return {}
    name = next((k for k in headers if k.lower() == "anthropic-beta"), "anthropic-beta")
    betas = [b.strip() for b in headers.get(name, "").split(",") if b.strip()]
    return {} if CLAUDE_FILES_BETA in betas else {name: ",".join([*betas, CLAUDE_FILES_BETA])}


def gemini_file_parts(block: Block) -> list[dict[str, Any]]:
    """``inlineData`` / ``fileData`` parts for Gemini (documents and audio alike)."""
    out: list[dict[str, Any]] = []
    for file in _files(block):
        if file.source == "data":
            out.append({"inlineData": {"mimeType": file.media_type, "data": file.value}})
            continue
        out.append({"fileData": {"fileUri": _gemini_uri(file), "mimeType": file.media_type}})
    return out


def _gemini_uri(file: FileRef) -> str:
    """A URL as given; a Gemini file id (``files/abc``) as the full URI of the file."""
    if file.source == "file_id" and not file.value.startswith(("http://", "https://", "gs://")):
        return GEMINI_FILES + file.value
    return file.value


def _interactions_type(file: FileRef) -> str:
    """The Interactions content type ``file`` goes as ("text": framed inline text); refused when none fits."""
    kinds = (("audio", INTERACTIONS_AUDIO), ("video", INTERACTIONS_VIDEO), ("document", INTERACTIONS_DOCUMENTS))
    for kind, types in kinds:
        if file.media_type in types:
            return kind
    if file.media_type.startswith("text/") and file.source == "data":
        return "text"
    raise _refuse(
        file,
        "The Interactions API",
        "it takes PDF, CSV, Office and OpenDocument documents, audio (wav, mp3, aac, ogg, flac...) and video "
        "(mp4, webm, mov...), and text inline; convert it first, or use GeminiEngine (generateContent)",
    )


def interactions_file_contents(block: Block) -> list[dict[str, Any]]:
    """``document`` / ``audio`` / ``video`` contents (``data`` or ``uri``) for Gemini's Interactions API;
    inline text as a framed ``text`` content."""
    out: list[dict[str, Any]] = []
    for file in _files(block):
        kind = _interactions_type(file)
        if kind == "text":
            out.append({"type": "text", "text": _framed_text(file, "The Interactions API")})
        elif file.source == "data":
            out.append({"type": kind, "data": file.value, "mime_type": file.media_type})
        else:
            out.append({"type": kind, "uri": _gemini_uri(file), "mime_type": file.media_type})
    return out
