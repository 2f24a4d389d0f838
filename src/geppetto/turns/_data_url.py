"""``data:`` URLs (RFC 2397): ``data:[<media type>][;base64],<data>``, the data percent-encoded or base64.

``data:text/plain,hi`` is the text ``hi``; ``data:;charset=utf-8,h%C3%A9`` is ``text/plain`` (the default
media type) with its charset; ``data:application/pdf;base64,JVBER...`` is a PDF. Every file geppetto sends
goes to the provider as base64, so a percent-encoded payload is encoded once here."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from urllib.parse import unquote, unquote_to_bytes

from .._exceptions import UsageError

__all__ = ["DataURL", "parse_data_url"]

DEFAULT_MEDIA_TYPE = "text/plain"
"""What a ``data:`` URL without a media type holds (RFC 2397: ``text/plain;charset=US-ASCII``)."""


@dataclass(frozen=True)
class DataURL:
    """A parsed ``data:`` URL: the media type (``type/subtype``, lower case, without parameters), its
    parameters (``{"charset": "utf-8"}``) and the payload as base64."""

    media_type: str
    base64: str
    parameters: dict[str, str] = field(default_factory=dict)
    given_type: bool = True
    """Whether the URL named its media type (else it is the default, ``text/plain``)."""


def parse_data_url(url: str, *, where: str = "the data: URL") -> DataURL:
    """``url`` (a ``data:`` URL) parsed per RFC 2397; a :class:`~geppetto.UsageError` naming ``where`` (the
    file it came from) when it has no comma, or nothing after it (an empty file is never sent)."""
    if not url[:5].lower() == "data:":
        raise UsageError(f"{where} is not a data: URL (it must start with 'data:')")
    head, comma, payload = url[5:].partition(",")
    if not comma:
        raise UsageError(
            f"{where} has no comma: write data:<media type>;base64,<data> or data:<media type>,<percent-encoded data>"
        )
    parts = [p.strip() for p in head.split(";")]
    encoded = len(parts) > 1 and parts[-1].lower() == "base64"
    if encoded:
        parts.pop()
    media_type = unquote(parts[0]).lower() if parts[0] else ""
    parameters: dict[str, str] = {}
    for part in parts[1:]:
        name, eq, value = part.partition("=")
        if name and eq:
            parameters[name.strip().lower()] = unquote(value.strip().strip('"'))
    if media_type and "/" not in media_type:
        raise UsageError(f"{where} names the media type {media_type!r}; give type/subtype, e.g. application/pdf")
    if encoded:
        # Percent-encoding is allowed in the base64 form too; whitespace is not part of it.
        data = "".join((unquote(payload) if "%" in payload else payload).split())
    else:
        data = base64.b64encode(unquote_to_bytes(payload)).decode("ascii")
    if not data:
        raise UsageError(
            f"{where} holds no data (nothing after the comma): attach the file's content, "
            f"e.g. data:{media_type or DEFAULT_MEDIA_TYPE};base64,<the file in base64>"
        )
    return DataURL(media_type or DEFAULT_MEDIA_TYPE, data, parameters, bool(media_type))
