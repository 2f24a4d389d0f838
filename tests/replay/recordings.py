"""The genuine recorded provider exchanges (``tests/fixtures/recorded``, a copy of
``../shared/reference/recorded``; see its README).

An exchange is genuine when its response kept a header besides ``content-type`` / ``content-length``
(the services send ``request-id``, ``openai-processing-ms``, ``server-timing``, ``alt-svc``, ...; the
hand-written cassettes keep none) and its ids do not look hand-made (``resp_1234``, ``msg_test_...``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
RECORDED = next(
    (
        p
        for p in (REPO / "tests" / "fixtures" / "recorded", REPO.parent / "shared" / "reference" / "recorded")
        if p.is_dir()
    ),
    REPO / "tests" / "fixtures" / "recorded",
)
"""Where the recordings live: the copy kept with the tests (with its licence), else the shared one beside
the checkout."""

_HAND_MADE_ID = re.compile(r'"id":\s*"(?:resp_1234|msg_test|msg_123|chatcmpl-123|resp_123\b)')
_PLAIN_HEADERS = {"content-type", "content-length"}


@dataclass(frozen=True)
class Exchange:
    """One recorded request and its answer."""

    path: str
    index: int
    provider: str  # anthropic | gemini | responses | chat
    request: dict[str, Any]
    response: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.path}#{self.index}"

    @property
    def status(self) -> int:
        return int(self.response.get("status", {}).get("code", 200))

    @property
    def streamed(self) -> bool:
        return "parsed_body" not in self.response

    @property
    def request_body(self) -> dict[str, Any]:
        return self.request.get("parsed_body") or {}

    @property
    def body_bytes(self) -> bytes:
        import json

        if self.streamed:
            return str(self.response["body"]["string"]).encode()
        return json.dumps(self.response["parsed_body"]).encode()

    @property
    def headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, values in (self.response.get("headers") or {}).items():
            if name.lower() in ("content-encoding", "transfer-encoding", "content-length"):
                continue
            out[name] = values[0] if isinstance(values, list) else str(values)
        return out


def _provider(uri: str) -> str | None:
    path = uri.split("?", 1)[0]
    if path.endswith("/v1/messages"):
        return "anthropic"
    if path.endswith((":generateContent", ":streamGenerateContent")):
        return "gemini"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/chat/completions"):
        return "chat"
    return None


def _genuine(response: dict[str, Any]) -> bool:
    headers = {k.lower() for k in response.get("headers") or {}}
    if not headers - _PLAIN_HEADERS:
        return False
    body = response.get("parsed_body")
    text = str(body) if body is not None else str((response.get("body") or {}).get("string") or "")
    return not _HAND_MADE_ID.search(text.replace("'", '"'))


def _echo_server(uri: str) -> bool:
    """The source project's echo endpoints (they answer with the request, not as a provider would)."""
    return uri.split("/")[2].endswith("workers.dev")


@functools.cache
def genuine_exchanges() -> tuple[Exchange, ...]:
    """Every genuine generation exchange of the four APIs, in file order."""
    found: list[Exchange] = []
    for path in sorted(RECORDED.rglob("*.yaml")):
        data = yaml.safe_load(path.read_text()) or {}
        for index, interaction in enumerate(data.get("interactions") or []):
            provider = _provider(str(interaction["request"].get("uri", "")))
            if provider is None or interaction["request"].get("method", "POST") != "POST":
                continue
            if _genuine(interaction["response"]) and not _echo_server(str(interaction["request"]["uri"])):
                found.append(
                    Exchange(
                        str(path.relative_to(RECORDED)),
                        index,
                        provider,
                        interaction["request"],
                        interaction["response"],
                    )
                )
    return tuple(found)
