"""Attachments before they are in a block: files on disk read inline, and attachment dicts put where they
belong in a user block's payload (images under ``images``, other files under ``files``). Kept apart from
:mod:`geppetto.turns._files` (which reads blocks) so ``Block.user(text, files=[...])`` can use it."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from os import PathLike
from typing import Any

from .._exceptions import UsageError

__all__ = ["MAX_ATTACHMENT_BYTES", "PAYLOAD_FILES", "attachments", "file_attachment", "place_attachments"]

PAYLOAD_FILES = "files"
"""Payload key of a user block: its attached files (see :mod:`geppetto.turns._files`)."""

_MEDIA_FIXES = {
    ".md": "text/markdown",
    ".csv": "text/csv",
    ".json": "application/json",
    ".mp3": "audio/mpeg",
    ".wav": "audio/wav",
}
MAX_ATTACHMENT_BYTES = 50 << 20
"""The largest file :func:`file_attachment` reads inline (providers take far less: 32 MB for Claude PDFs)."""


def attachments(items: Iterable[Any]) -> list[dict[str, Any]]:
    """Attachment dicts from paths (read by :func:`file_attachment`) and dicts (copied as they are)."""
    out: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str | PathLike):
            out.append(file_attachment(item))
        elif isinstance(item, Mapping):
            out.append(dict(item))
        else:
            raise UsageError(
                f"an attachment is a path or a dict with 'media_type' and one of 'url', 'data', 'file_id'; got {item!r}"
            )
    return out


def file_attachment(path: str | PathLike[str], *, max_bytes: int = MAX_ATTACHMENT_BYTES) -> dict[str, Any]:
    """A file on disk as a user block attachment (inline base64, its media type guessed from the name).

    An image goes under ``Block.user(..., images=[...])``, anything else under ``payload["files"]``:
    :func:`attach_files` puts each where it belongs."""
    from pathlib import Path  # not loaded by `import geppetto`

    file = Path(path)
    if file.is_dir():
        raise UsageError(f"cannot attach {str(file)!r}: it is a folder; attach the files in it one by one")
    if not file.is_file():
        raise UsageError(f"cannot attach {str(file)!r}: no such file")
    size = file.stat().st_size
    if size > max_bytes:
        raise UsageError(
            f"cannot attach {str(file)!r}: {size} bytes is more than the {max_bytes} bytes sent inline; "
            "upload it to the provider and attach its file_id instead"
        )
    import mimetypes  # loaded by the first file attached, not by `import geppetto`

    media_type = _MEDIA_FIXES.get(file.suffix.lower()) or mimetypes.guess_type(file.name)[0]
    if not media_type:
        raise UsageError(
            f"cannot tell what {file.name!r} is from its name; attach a file with a known extension (.pdf, .txt, .wav, .png...)"
        )
    data = base64.b64encode(file.read_bytes()).decode("ascii")
    return {"media_type": media_type, "data": data, "filename": file.name}


def place_attachments(payload: dict[str, Any], items: Iterable[Mapping[str, Any]]) -> None:
    """Add attachment dicts to a user block's ``payload``: images to its images, other files to its files."""
    for item in items:
        media_type = str(item.get("media_type") or "")
        if media_type.startswith("image/"):
            image = {k: v for k, v in item.items() if k in ("url", "data", "media_type", "file_id")}
            payload.setdefault("images", []).append(image)
        else:
            payload.setdefault(PAYLOAD_FILES, []).append(dict(item))
