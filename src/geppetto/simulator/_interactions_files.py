"""Images, documents, audio and video in Interactions ``user_input`` contents: checked as the service checks
them (exactly one of ``data`` and ``uri``, base64 that decodes, a ``mime_type`` with inline data and one of
the content type's own media types, those the google-genai types name), and described for the scripted
model as the other APIs' attachments are (``Attached: document (application/pdf, 13 bytes)``). A ``text``
content holding a framed file (``-----BEGIN FILE name=".." type=".."-----``) is read as that file. The
service's wording for these refusals is not recorded: the texts are the simulator's own, in its style."""

from __future__ import annotations

from typing import Any

from ..providers import INTERACTIONS_AUDIO, INTERACTIONS_DOCUMENTS, INTERACTIONS_VIDEO
from ._attachments import _decoded, _describe, _file_msgs, described_framed_file
from ._errors import SimError
from ._model import Msg

__all__ = ["check_media_content", "interactions_files"]

_IMAGES = frozenset(f"image/{t}" for t in ("png", "jpeg", "webp", "heic", "heif", "gif", "bmp", "tiff"))
_MEDIA_TYPES = {"image": _IMAGES, "audio": INTERACTIONS_AUDIO, "document": INTERACTIONS_DOCUMENTS}
_MEDIA_TYPES["video"] = INTERACTIONS_VIDEO


def _invalid(message: str) -> SimError:
    return SimError(400, message, code="invalid_request")  # unverified text


def check_media_content(content: dict[str, Any], where: str) -> None:
    """An image, audio, document or video content as the service takes it (text contents pass)."""
    kind = str(content.get("type"))
    types = _MEDIA_TYPES.get(kind)
    if types is None:
        return
    sources = [k for k in ("data", "uri") if content.get(k)]
    if len(sources) != 1:
        raise _invalid(f"{where}: a {kind} content needs exactly one of 'data' or 'uri'.")
    mime_type = content.get("mime_type")
    if sources == ["data"]:
        if not mime_type:
            raise _invalid(f"{where}.mime_type: mime_type is required with inline data.")
        if _decoded(str(content["data"]), lenient=True) is None:
            raise _invalid(f'{where}.data: Base64 decoding failed for "{str(content["data"])[:40]}".')
    if mime_type and mime_type not in types:
        raise _invalid(f"{where}.mime_type: unsupported mime type '{mime_type}' for {kind} content.")


def interactions_files(contents: Any) -> list[Msg]:
    """The attachments of a ``user_input`` step's contents, described."""
    out: list[str] = []
    for content in contents if isinstance(contents, list) else []:
        kind = content.get("type") if isinstance(content, dict) else None
        framed = described_framed_file(content) if kind == "text" else None
        if framed is not None:
            out.append(framed)
        elif kind in _MEDIA_TYPES and content.get("data"):
            out.append(_describe(str(kind), str(content.get("mime_type") or ""), str(content["data"])))
        elif kind in _MEDIA_TYPES:
            out.append(_describe(str(content.get("uri")), str(content.get("mime_type") or "")))
    return _file_msgs(out)
