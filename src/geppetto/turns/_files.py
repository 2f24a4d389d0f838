"""Files in user blocks: documents (PDF, text...) and audio, by URL, inline bytes or a provider file id.

A user block's ``payload["files"]`` is a list of dicts, each with a ``media_type`` (``application/pdf``,
``audio/wav``...) and exactly one source: ``url`` (http(s), or a ``data:`` URL), ``data`` (base64) or
``file_id`` (a file uploaded to the provider: ``file-...`` for OpenAI, ``file_...`` for Claude,
``files/...`` for Gemini); ``filename`` is optional. Images stay under ``payload["images"]``; an image
given as a file is read as one. Each engine translates files for its provider and refuses, naming what
to do instead, what the provider cannot take.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .._exceptions import UsageError
from ._attach import MAX_ATTACHMENT_BYTES, PAYLOAD_FILES, attachments, file_attachment, place_attachments
from ._data_url import parse_data_url
from ._model import Block

__all__ = [
    "MAX_ATTACHMENT_BYTES",
    "PAYLOAD_FILES",
    "FileRef",
    "attach_files",
    "attachments",
    "file_attachment",
    "file_refs",
]


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
        filename = str(raw.get("filename") or "")
        media_type = str(raw.get("media_type") or raw.get("mime_type") or "")
        if source == "url" and value[:5].lower() == "data:":
            parsed = parse_data_url(value, where=f"{where}{f' ({filename})' if filename else ''}")
            source, value = "data", parsed.base64
            media_type = media_type or parsed.media_type
        if not media_type:
            raise UsageError(f"{where} has no 'media_type'; say what it is, e.g. 'application/pdf' or 'audio/wav'")
        out.append(FileRef(_kind(media_type), media_type, source, value, filename))  # type: ignore[arg-type]
    return out


def attach_files(block: Block, attachments: list[dict[str, Any]]) -> Block:
    """``block`` (a user block) with ``attachments`` added: images to its images, other files to its files."""
    place_attachments(block.payload, attachments)
    return block
