"""Files in user blocks: documents (PDF, text...) and audio, by URL, inline bytes or a provider file id.

A user block's ``payload["files"]`` is a list of dicts, each with a ``media_type`` (``application/pdf``,
``audio/wav``...) and exactly one source: ``url`` (http(s), or a ``data:`` URL), ``data`` (base64) or
``file_id`` (a file uploaded to the provider: ``file-...`` for OpenAI, ``file_...`` for Claude,
``files/...`` for Gemini); ``filename`` is optional. Images stay under ``payload["images"]``; an image
given as a file is read as one. Each engine translates files for its provider and refuses, naming what
to do instead, what the provider cannot take.
"""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .._exceptions import UsageError
from ._model import Block

__all__ = ["MAX_ATTACHMENT_BYTES", "PAYLOAD_FILES", "FileRef", "attach_files", "file_attachment", "file_refs"]

PAYLOAD_FILES = "files"
"""Payload key of a user block: its attached files (see the module docstring)."""

_MEDIA_FIXES = {".md": "text/markdown", ".csv": "text/csv", ".json": "application/json", ".mp3": "audio/mpeg"}
MAX_ATTACHMENT_BYTES = 50 << 20
"""The largest file :func:`file_attachment` reads inline (providers take far less: 32 MB for Claude PDFs)."""


@dataclass(frozen=True)
class FileRef:
    """One attached file, checked: its kind, media type and single source."""

    kind: Literal["image", "document", "audio"]
    media_type: str
    source: Literal["url", "data", "file_id"]
    value: str
    filename: str = ""

    @property
    def data_url(self) -> str:
        """The file as a ``data:`` URL (inline data only)."""
        return self.value if self.value.startswith("data:") else f"data:{self.media_type};base64,{self.value}"

    @property
    def audio_format(self) -> str:
        """``wav`` or ``mp3`` (what OpenAI's ``input_audio`` takes), else ""."""
        subtype = self.media_type.split("/", 1)[-1].lower()
        return {"wav": "wav", "x-wav": "wav", "wave": "wav", "mpeg": "mp3", "mp3": "mp3"}.get(subtype, "")


def _kind(media_type: str) -> Literal["image", "document", "audio"]:
    if media_type.startswith("image/"):
        return "image"
    if media_type.startswith("audio/"):
        return "audio"
    return "document"


def file_refs(block: Block) -> list[FileRef]:
    """The files of a user block, checked; a malformed one is a :class:`~geppetto.UsageError` naming the fix."""
    out: list[FileRef] = []
    for index, raw in enumerate(block.payload.get(PAYLOAD_FILES) or []):
        where = f"file {index} of the user block"
        if not isinstance(raw, dict):
            raise UsageError(
                f"{where} must be a dict with 'media_type' and one of 'url', 'data', 'file_id'; got {raw!r}"
            )
        sources = [k for k in ("url", "data", "file_id") if raw.get(k)]
        if len(sources) != 1:
            raise UsageError(
                f"{where} needs exactly one of 'url', 'data' (base64) or 'file_id'; it has {sources or 'none'}"
            )
        source = sources[0]
        value = str(raw[source])
        media_type = str(raw.get("media_type") or raw.get("mime_type") or "")
        if not media_type and value.startswith("data:"):
            media_type = value[5:].split(";", 1)[0]
        if not media_type:
            raise UsageError(f"{where} has no 'media_type'; say what it is, e.g. 'application/pdf' or 'audio/wav'")
        if source == "url" and value.startswith("data:"):
            source, value = "data", value.partition(";base64,")[2]
        out.append(FileRef(_kind(media_type), media_type, source, value, str(raw.get("filename") or "")))  # type: ignore[arg-type]
    return out


def file_attachment(path: str | Path) -> dict[str, Any]:
    """A file on disk as a user block attachment (inline base64, its media type guessed from the name).

    An image goes under ``Block.user(..., images=[...])``, anything else under ``payload["files"]``:
    :func:`attach_files` puts each where it belongs."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"cannot attach {str(file)!r}: no such file")
    size = file.stat().st_size
    if size > MAX_ATTACHMENT_BYTES:
        raise UsageError(
            f"cannot attach {str(file)!r}: {size} bytes is more than {MAX_ATTACHMENT_BYTES}; upload it to the provider and pass its file_id"
        )
    media_type = _MEDIA_FIXES.get(file.suffix.lower()) or mimetypes.guess_type(file.name)[0]
    if not media_type:
        raise UsageError(
            f"cannot tell what {file.name!r} is from its name; attach a file with a known extension (.pdf, .txt, .wav, .png...)"
        )
    data = base64.b64encode(file.read_bytes()).decode("ascii")
    return {"media_type": media_type, "data": data, "filename": file.name}


def attach_files(block: Block, attachments: list[dict[str, Any]]) -> Block:
    """``block`` (a user block) with ``attachments`` added: images to its images, other files to its files."""
    for item in attachments:
        media_type = str(item.get("media_type") or "")
        if media_type.startswith("image/"):
            image = {k: v for k, v in item.items() if k in ("url", "data", "media_type", "file_id")}
            block.payload.setdefault("images", []).append(image)
        else:
            block.payload.setdefault(PAYLOAD_FILES, []).append(dict(item))
    return block
