"""The genuine recorded provider exchanges (``tests/fixtures/recorded``, a copy of
``../shared/reference/recorded``; see its README), as the replay suite (through the engines) and the
simulator suite (against the simulator) read them.

An exchange is genuine when its response kept a header besides ``content-type`` / ``content-length``
(the services send ``request-id``, ``openai-processing-ms``, ``server-timing``, ``alt-svc``, ...; the
hand-written cassettes keep none), its ids do not look hand-made (``resp_1234``, ``msg_test_...``), its
request is a JSON object and it was not sent to one of the source project's echo endpoints (they answer
with the request, not as a provider would); only genuine exchanges are facts about the services.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

_REPO = Path(__file__).resolve().parents[1]
ROOT = next(
    (
        p
        for p in (_REPO / "tests" / "fixtures" / "recorded", _REPO.parent / "shared" / "reference" / "recorded")
        if p.is_dir()
    ),
    _REPO / "tests" / "fixtures" / "recorded",
)
"""Where the recordings live: the copy kept with the tests (with its licence), else the shared one beside
the checkout."""
MISSING = f"the recorded provider traffic is not at {ROOT} (a copy lives in tests/fixtures/recorded)"

GENERATION = ("responses", "chat", "anthropic", "gemini")
"""The APIs that generate an answer (the others: ``count_tokens``, ``compact``, ``conversations``)."""

_PLAIN_HEADERS = {"content-type", "content-length"}
_HAND_MADE = re.compile(
    r"\b(resp_1234|resp_test|msg_test_|msg_1234|chatcmpl-1234|toolu_1234|call_1234)"
    r'|"id":\s*"(?:resp_1234|msg_test|msg_123|chatcmpl-123|resp_123\b)'
)
_TRANSPORT_HEADERS = ("content-encoding", "transfer-encoding", "content-length")


@dataclass(frozen=True)
class Exchange:
    """One recorded request and its answer: the cassette's own ``request`` and ``response`` entries, and
    what is read from them."""

    cassette: str
    index: int
    api: str  # one of GENERATION, or "count_tokens", "compact", "conversations"
    request: dict[str, Any]
    response: dict[str, Any]
    body: dict[str, Any]  # the request's JSON body
    answer: Any  # the answer's parsed JSON, or None for a stream
    stream_text: str | None  # the raw Server-Sent Events of a streamed answer

    @property
    def name(self) -> str:
        return f"{self.cassette}#{self.index}"

    @property
    def uri(self) -> str:
        return str(self.request["uri"])

    @property
    def status(self) -> int:
        return int((self.response.get("status") or {}).get("code", 200))

    @property
    def generation(self) -> bool:
        return self.api in GENERATION

    @property
    def served(self) -> bool:
        """Whether the simulator serves this API at this path (not Gemini's OpenAI-compatible endpoint)."""
        return not (self.api == "chat" and "/openai/chat/" in urlsplit(self.uri).path and "/v1beta/" in self.uri)

    @property
    def path(self) -> str:
        """The request path as the simulator serves it (Vertex paths mapped to the Gemini API's)."""
        path = urlsplit(self.uri).path
        if self.api == "gemini":
            return "/v1beta/models/" + path.rsplit("/models/", 1)[1]
        if path.startswith("/openai/v1/"):  # Azure OpenAI
            return path[len("/openai") :]
        return path

    @property
    def target(self) -> str:
        """The path with the recorded query (``alt=sse``, ``beta=true``)."""
        query = urlsplit(self.uri).query
        return f"{self.path}?{query}" if query else self.path

    @property
    def streamed(self) -> bool:
        return "parsed_body" not in self.response

    @property
    def body_bytes(self) -> bytes:
        """The answer's body as the service sent it (its JSON, or the stream's text)."""
        if self.streamed:
            return str(self.response["body"]["string"]).encode()
        return json.dumps(self.response["parsed_body"]).encode()

    @property
    def headers(self) -> dict[str, str]:
        """The answer's headers, less those of its transfer (the body here is already decoded)."""
        out: dict[str, str] = {}
        for name, values in (self.response.get("headers") or {}).items():
            if name.lower() not in _TRANSPORT_HEADERS:
                out[name] = str(values[0]) if isinstance(values, list) and values else str(values)
        return out


def _api(uri: str) -> str | None:
    path = urlsplit(uri).path
    if path.endswith("/v1/responses"):
        return "responses"
    if path.endswith("/v1/responses/compact"):
        return "compact"
    if path == "/v1/conversations":
        return "conversations"
    if path.endswith("/chat/completions"):
        return "chat"
    if path == "/v1/messages":
        return "anthropic"
    if path == "/v1/messages/count_tokens":
        return "count_tokens"
    if "/models/" in path and path.endswith(("generateContent", "streamGenerateContent")):
        return "gemini"
    return None


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _genuine(response: dict[str, Any], texts: list[str]) -> bool:
    if not {k.lower() for k in response.get("headers") or {}} - _PLAIN_HEADERS:
        return False
    return not any(_HAND_MADE.search(t) for t in texts)


def _exchange(cassette: str, index: int, request: dict[str, Any], response: dict[str, Any]) -> Exchange | None:
    api = _api(str(request.get("uri", "")))
    if (
        api is None
        or request.get("method", "POST") != "POST"
        or urlsplit(request["uri"]).netloc.endswith("workers.dev")
    ):
        return None
    body = request.get("parsed_body")
    if body is None and isinstance(request.get("body"), str):
        body = _parse(request["body"])
    answer = response.get("parsed_body")
    raw = response.get("body")
    stream_text = raw.get("string") if isinstance(raw, dict) else None
    if answer is None and stream_text is not None and not stream_text.lstrip().startswith(("data:", "event:")):
        answer, stream_text = _parse(stream_text), None
    texts = [json.dumps(answer), stream_text or "", json.dumps(body)]
    if not isinstance(body, dict) or not _genuine(response, texts):
        return None
    return Exchange(cassette, index, api, request, response, body, answer, stream_text)


@functools.cache
def exchanges() -> tuple[Exchange, ...]:
    """Every genuine recorded exchange with one of the APIs, in recorded order."""
    out: list[Exchange] = []
    for file in sorted(ROOT.rglob("*.yaml")):
        data = yaml.safe_load(file.read_text()) or {}
        for index, item in enumerate(data.get("interactions") or []):
            found = _exchange(str(file.relative_to(ROOT)), index, item["request"], item["response"])
            if found is not None:
                out.append(found)
    return tuple(out)
