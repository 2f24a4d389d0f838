"""Files, documents, audio and images in user messages: checked as each service checks them, and described
so the scripted model can say what it was given (``You said: ... Attached: a.pdf (application/pdf, 13
bytes)``), which makes attachments testable end to end offline.

Each API's ``to_msgs`` adds one ``Msg("file", description)`` per attachment after the message's text; the
shapes are the services' own (Claude's in ``_anthropic_rules``, the OpenAI ones in the bundled OpenAPI
schema); the extra checks here are those a schema cannot state: which source a part needs, base64 that
decodes, a PDF where only PDFs go, audio only for audio models.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from ._errors import SimError
from ._model import Msg
from ._shapes import array, obj, one_of, scalar, tagged

__all__ = [
    "CLAUDE_DOCUMENT",
    "CLAUDE_IMAGE",
    "chat_files",
    "check_chat_files",
    "check_claude_files",
    "check_gemini_files",
    "check_responses_files",
    "claude_files",
    "gemini_files",
    "responses_files",
]

_STR, _DICT = scalar("str"), scalar("dict")
_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
CLAUDE_IMAGE = obj(
    {
        "source": tagged(
            "type",
            {
                "base64": obj({"media_type": scalar("str", enum=_IMAGE_TYPES), "data": _STR}, "media_type", "data"),
                "url": obj({"url": _STR}, "url"),
                "file": obj({"file_id": _STR}, "file_id"),
            },
        ),
        "cache_control": _DICT,
    },
    "source",
)
"""Claude's ``image`` block: its source base64 (four image types), url or file."""
CLAUDE_DOCUMENT = obj(
    {
        "source": tagged(
            "type",
            {
                "base64": obj(
                    {"media_type": scalar("str", enum=("application/pdf",)), "data": _STR}, "media_type", "data"
                ),
                "text": obj({"media_type": scalar("str", enum=("text/plain",)), "data": _STR}, "media_type", "data"),
                "url": obj({"url": _STR}, "url"),
                "file": obj({"file_id": _STR}, "file_id"),
                "content": obj({"content": one_of(_STR, array(_DICT))}, "content"),
            },
        ),
        "title": _STR,
        "context": _STR,
        "citations": _DICT,
        "cache_control": _DICT,
    },
    "source",
)
"""Claude's ``document`` block: a PDF (base64, url or file), plain text, or content blocks."""

_EXCERPT = 60


def _decoded(data: str, *, lenient: bool = False) -> bytes | None:
    """The bytes of base64 ``data``, or None; ``lenient`` reads it as proto JSON does bytes (URL-safe too,
    padding optional)."""
    if lenient:
        data = data.replace("-", "+").replace("_", "/")
        data += "=" * (-len(data) % 4)
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _describe(name: str, media_type: str, data: str | None = None) -> str:
    """``a.pdf (application/pdf, 13 bytes)``; inline text adds its opening, so a test sees it arrived whole."""
    if data is None:
        return f"{name} ({media_type})" if media_type else name
    raw = _decoded(data, lenient=True) or b""
    text = f"{name} ({media_type}, {len(raw)} bytes)"
    if media_type.startswith("text/"):
        opening = raw.decode("utf-8", "replace")
        text += f': "{opening[:_EXCERPT]}{"..." if len(opening) > _EXCERPT else ""}"'
    return text


def _data_url(value: str) -> tuple[str, str] | None:
    """(media type, base64) of a ``data:...;base64,`` URL, or None."""
    head, sep, data = value.partition(";base64,")
    if not sep or not head.startswith("data:"):
        return None
    return head[5:], data


def _file_msgs(descriptions: list[str]) -> list[Msg]:
    return [Msg("file", d) for d in descriptions]


# -- Chat Completions ------------------------------------------------------------------------------
_CHAT_PDF = (
    "Invalid file data: '{path}'. Expected a base64-encoded data URL with an application/pdf MIME type "
    "(e.g. 'data:application/pdf;base64,SGVsbG8sIFdvcmxkIQ=='), but got {got}."
)


def check_chat_files(messages: list[Any], model: str) -> None:
    """Files inline must be PDF data URLs, a file part needs file_id or file_data, audio needs an audio model."""
    for index, message in enumerate(messages):
        content = message.get("content") if message.get("role") == "user" else None
        for position, part in enumerate(content if isinstance(content, list) else []):
            where = f"messages[{index}].content[{position}]"
            if part.get("type") == "file":
                _check_chat_file(part.get("file") or {}, f"{where}.file")
            elif part.get("type") == "input_audio":
                if "audio" not in model.lower():
                    raise SimError(
                        400,
                        "Invalid content type. input_audio is only supported by audio models "
                        "(for example gpt-4o-audio-preview).",
                        param=f"{where}.type",
                        code="invalid_value",
                    )
                if _decoded(str((part.get("input_audio") or {}).get("data", ""))) is None:
                    raise SimError(
                        400,
                        f"Invalid value for '{where}.input_audio.data': expected base64-encoded audio.",
                        param=f"{where}.input_audio.data",
                        code="invalid_value",
                    )


def _check_chat_file(file: dict[str, Any], where: str) -> None:
    if not file.get("file_id") and not file.get("file_data"):
        raise SimError(
            400,
            f"Missing required parameter: '{where}.file_id' (or '{where}.file_data').",
            param=f"{where}.file_id",
            code="missing_required_parameter",
        )
    data = file.get("file_data")
    if data is None:
        return
    parsed = _data_url(str(data))
    if parsed is None or _decoded(parsed[1]) is None:
        got = "an invalid base64-encoded value"
    elif parsed[0] != "application/pdf":
        got = f"unsupported MIME type '{parsed[0]}'"
    else:
        return
    raise SimError(400, _CHAT_PDF.format(path=f"{where}.file_data", got=got), param=f"{where}.file_data")


_FRAMED = re.compile(
    r'-----BEGIN FILE(?: name="([^"]*)")?(?: id="[^"]*")? type="([^"]*)"-----\n(.*)\n-----END FILE-----\s*$', re.S
)


def framed_file(part: dict[str, Any]) -> re.Match[str] | None:
    """A text part holding a whole text file framed ``-----BEGIN FILE name=".." type=".."-----`` (as geppetto
    and other clients send text files to Chat Completions), read as an attachment rather than as the prompt."""
    text = part.get("text") if part.get("type") == "text" else None
    return _FRAMED.match(text) if isinstance(text, str) and text.startswith("-----BEGIN FILE") else None


def described_framed_file(part: dict[str, Any]) -> str | None:
    """The description of the framed text file a part holds (:func:`framed_file`), None for any other part."""
    framed = framed_file(part)
    if framed is None:
        return None
    encoded = base64.b64encode(framed.group(3).encode()).decode()
    return _describe(framed.group(1) or "file", framed.group(2), encoded)


def chat_files(content: Any) -> list[Msg]:
    """The attachments of a Chat message's content, described."""
    out: list[str] = []
    for part in content if isinstance(content, list) else []:
        kind = part.get("type") if isinstance(part, dict) else None
        framed = described_framed_file(part) if kind == "text" else None
        if framed is not None:
            out.append(framed)
        elif kind == "image_url":
            out.append(_url_or_data("image", str((part.get("image_url") or {}).get("url", ""))))
        elif kind == "file":
            file = part.get("file") or {}
            if file.get("file_id"):
                out.append(f"file {file['file_id']}")
            else:
                out.append(_url_or_data(str(file.get("filename") or "file"), str(file.get("file_data", ""))))
        elif kind == "input_audio":
            audio = part.get("input_audio") or {}
            out.append(_describe("audio", f"audio/{audio.get('format')}", str(audio.get("data", ""))))
    return _file_msgs(out)


def _url_or_data(name: str, value: str) -> str:
    parsed = _data_url(value)
    return _describe(name, parsed[0], parsed[1]) if parsed else _describe(value, "")


# -- Responses -------------------------------------------------------------------------------------
def _user_contents(items: Any) -> list[tuple[int, list[Any]]]:
    if not isinstance(items, list):
        return []
    return [
        (index, item["content"])
        for index, item in enumerate(items)
        if isinstance(item, dict) and item.get("role") == "user" and isinstance(item.get("content"), list)
    ]


def check_responses_files(items: Any) -> None:
    """An ``input_file`` needs exactly one of file_id, file_url and file_data, and file_data is a base64 data URL."""
    for index, content in _user_contents(items):
        for position, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "input_file":
                continue
            where = f"input[{index}].content[{position}]"
            given = [k for k in ("file_id", "file_url", "file_data") if part.get(k)]
            if len(given) != 1:
                raise SimError(
                    400,
                    f"Invalid '{where}': provide exactly one of 'file_id', 'file_url' or 'file_data'"
                    + (f"; got {', '.join(given)}." if given else "."),
                    param=where,
                    code="invalid_value" if given else "missing_required_parameter",
                )
            data = part.get("file_data")
            parsed = _data_url(str(data)) if data else None
            if data and (parsed is None or _decoded(parsed[1]) is None):
                raise SimError(
                    400,
                    f"Invalid value for '{where}.file_data': expected a base64-encoded data URL "
                    "(e.g. 'data:application/pdf;base64,SGVsbG8sIFdvcmxkIQ==').",
                    param=f"{where}.file_data",
                    code="invalid_value",
                )


def responses_files(content: Any) -> list[Msg]:
    """The attachments of a Responses message's content, described."""
    out: list[str] = []
    for part in content if isinstance(content, list) else []:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "input_image":
            out.append(f"image {part['file_id']}" if part.get("file_id") else _url_or_data("image", part["image_url"]))
        elif kind == "input_file":
            if part.get("file_id"):
                out.append(f"file {part['file_id']}")
            elif part.get("file_url"):
                out.append(_describe(str(part["file_url"]), ""))
            else:
                out.append(_url_or_data(str(part.get("filename") or "file"), str(part.get("file_data", ""))))
    return _file_msgs(out)


# -- Claude ----------------------------------------------------------------------------------------
_CLAUDE_SOURCES = {"document": "'base64', 'text', 'url', 'content'", "image": "'base64', 'url'"}


def check_claude_files(messages: list[Any], betas: str = "") -> None:
    """An inline PDF must be a PDF, and base64 must decode (the shapes are checked with the request's); a
    ``file`` source (the Files API) needs its beta in ``anthropic-beta`` (``betas``), else it is unknown."""
    for index, message in enumerate(messages):
        content = message.get("content")
        for position, block in enumerate(content if isinstance(content, list) else []):
            source = block.get("source") if block.get("type") in ("document", "image") else None
            if isinstance(source, dict) and source.get("type") == "file" and "files-api-2025-04-14" not in betas:
                raise SimError(
                    400,
                    f"messages.{index}.content.{position}.{block['type']}.source: Input tag 'file' found using "
                    f"'type' does not match any of the expected tags: {_CLAUDE_SOURCES[block['type']]}",
                )
            if not isinstance(source, dict) or source.get("type") != "base64":
                continue
            raw = _decoded(str(source.get("data", "")))
            where = f"messages.{index}.content.{position}"
            if block["type"] == "document" and (raw is None or not raw.startswith(b"%PDF")):
                raise SimError(400, f"{where}.pdf.source.base64.data: The PDF specified was not valid.")
            if raw is None:
                raise SimError(400, f"{where}.image.source.base64.data: The image data is not valid base64.")


def claude_files(content: Any) -> list[Msg]:
    """The attachments of a Claude message's content blocks, described."""
    out: list[str] = []
    for block in content if isinstance(content, list) else []:
        kind = block.get("type") if isinstance(block, dict) else None
        source = block.get("source") if kind in ("document", "image") else None
        if not isinstance(source, dict):
            continue
        name = str(block.get("title") or kind)
        origin = source.get("type")
        if origin == "base64":
            out.append(_describe(name, str(source.get("media_type")), str(source.get("data", ""))))
        elif origin == "text":
            text = str(source.get("data", ""))
            encoded = base64.b64encode(text.encode()).decode()
            out.append(_describe(name, "text/plain", encoded))
        elif origin == "url":
            out.append(_describe(str(source.get("url")), ""))
        elif origin == "file":
            out.append(f"{kind} {source.get('file_id')}")
        else:
            out.append(f"{name} (content)")
    return _file_msgs(out)


# -- Gemini ----------------------------------------------------------------------------------------
def _proto(value: dict[str, Any], name: str) -> Any:
    """A field by its JSON name or its proto (snake_case) name, both of which the service reads."""
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
    return value.get(name, value.get(snake))


def check_gemini_files(contents: list[Any]) -> None:
    """Inline data needs its mimeType and base64 that decodes; file data needs its fileUri."""
    for position, content in enumerate(contents):
        for index, part in enumerate(content.get("parts") or []):
            where = f"contents[{position}].parts[{index}]"
            blob = _proto(part, "inlineData")
            if isinstance(blob, dict):
                if not _proto(blob, "mimeType"):
                    raise SimError(
                        400, f"* GenerateContentRequest.{where}.inline_data.mime_type: mime_type is required"
                    )
                data = str(blob.get("data", ""))
                if _decoded(data, lenient=True) is None:
                    raise SimError(
                        400,
                        f"Invalid value at '{where}.inline_data.data' (TYPE_BYTES), Base64 decoding failed for "
                        f'"{data[:40]}"',
                    )
            file = _proto(part, "fileData")
            if isinstance(file, dict) and not _proto(file, "fileUri"):
                raise SimError(400, f"* GenerateContentRequest.{where}.file_data.file_uri: file_uri is required")


def gemini_files(part: dict[str, Any]) -> list[Msg]:
    """A Gemini part's attachment, described (none for other parts)."""
    blob = _proto(part, "inlineData")
    if isinstance(blob, dict):
        media_type = str(_proto(blob, "mimeType"))
        major = media_type.split("/")[0]
        name = major if major in ("image", "audio", "video") else "document"
        return _file_msgs([_describe(name, media_type, str(blob.get("data", "")))])
    file = _proto(part, "fileData")
    if isinstance(file, dict):
        return _file_msgs([_describe(str(_proto(file, "fileUri")), str(_proto(file, "mimeType") or ""))])
    return []
