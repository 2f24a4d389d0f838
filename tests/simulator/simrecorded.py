"""Loading the real recorded provider traffic in ../shared/reference/recorded (see its README).

An exchange is genuine when its response kept a provider header besides content-type/content-length and
its ids do not look hand-made (`resp_1234`, `msg_test_...`); only genuine exchanges are facts about the
services.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import yaml

from geppetto.simulator import BuiltinCall, Reply, Simulator, ToolCall

_REPO = Path(__file__).resolve().parents[2]
# The copy kept with the tests (tests/fixtures/recorded, with its licence), else the shared one beside the checkout.
ROOT = next(
    (
        p
        for p in (_REPO / "tests" / "fixtures" / "recorded", _REPO.parent / "shared" / "reference" / "recorded")
        if p.is_dir()
    ),
    _REPO / "tests" / "fixtures" / "recorded",
)
MISSING = f"the recorded provider traffic is not at {ROOT} (a copy lives in tests/fixtures/recorded)"

_PLAIN_HEADERS = {"content-type", "content-length"}
_HAND_MADE = re.compile(r"\b(resp_1234|resp_test|msg_test_|msg_1234|chatcmpl-1234|toolu_1234|call_1234)")


@dataclass(frozen=True)
class Exchange:
    """One recorded request and its answer."""

    cassette: str
    index: int
    api: str  # "responses", "chat", "anthropic", "gemini", "count_tokens", or "compact"/"conversations"
    method: str
    uri: str
    body: Any
    status: int
    headers: dict[str, str]
    answer: Any  # parsed JSON, or None for a stream
    stream_text: str | None  # raw SSE text of a streamed answer

    @property
    def name(self) -> str:
        return f"{self.cassette}#{self.index}"

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
        """The path with the recorded query (`alt=sse`, `beta=true`)."""
        query = urlsplit(self.uri).query
        return f"{self.path}?{query}" if query else self.path

    @property
    def generation(self) -> bool:
        return self.api in GENERATION


GENERATION = ("responses", "chat", "anthropic", "gemini")


def answer_ids(answer: Any, stream_text: str | None) -> list[str]:
    """The ids an answer introduces that later requests may name: the response or conversation id, then
    its output items' ids (from the JSON body, or from a stream's final response event)."""
    answer = final_response(answer, stream_text)
    if answer is None or not isinstance(answer.get("id"), str):
        return []
    items = answer.get("output") if isinstance(answer.get("output"), list) else []
    return [answer["id"], *(str(i["id"]) for i in items if isinstance(i, dict) and isinstance(i.get("id"), str))]


def _api(uri: str) -> str | None:
    path = urlsplit(uri).path
    if path.endswith("/v1/responses"):
        return "responses"
    if path.endswith("/v1/responses/compact"):
        return "compact"
    if path == "/v1/conversations":
        return "conversations"
    if path.endswith("/v1/chat/completions") and "generativelanguage" not in uri:
        return "chat"
    if path == "/v1/messages":
        return "anthropic"
    if path == "/v1/messages/count_tokens":
        return "count_tokens"
    if "/models/" in path and path.endswith(("generateContent", "streamGenerateContent")):
        return "gemini"
    return None


def _genuine(headers: dict[str, Any], texts: list[str]) -> bool:
    if not any(k.lower() not in _PLAIN_HEADERS for k in headers):
        return False
    return not any(_HAND_MADE.search(t) for t in texts)


def _first(value: Any) -> str:
    return str(value[0]) if isinstance(value, list) and value else str(value)


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


@functools.cache
def exchanges() -> tuple[Exchange, ...]:
    """Every genuine recorded exchange with an API the simulator serves, in recorded order."""
    out: list[Exchange] = []
    for file in sorted(ROOT.rglob("*.yaml")):
        data = yaml.safe_load(file.read_text()) or {}
        for index, item in enumerate(data.get("interactions") or []):
            request, response = item["request"], item["response"]
            api = _api(request["uri"])
            if api is None or request["method"] != "POST":
                continue
            body = request.get("parsed_body")
            if body is None and isinstance(request.get("body"), str):
                body = _parse(request["body"])
            answer = response.get("parsed_body")
            raw = response.get("body")
            stream_text = raw.get("string") if isinstance(raw, dict) else None
            if answer is None and stream_text is not None and not stream_text.lstrip().startswith(("data:", "event:")):
                answer, stream_text = _parse(stream_text), None
            headers = {k.lower(): _first(v) for k, v in (response.get("headers") or {}).items()}
            texts = [json.dumps(answer), stream_text or "", json.dumps(body)]
            if not isinstance(body, dict) or not _genuine(headers, texts):
                continue
            out.append(
                Exchange(
                    cassette=str(file.relative_to(ROOT)),
                    index=index,
                    api=api,
                    method=request["method"],
                    uri=request["uri"],
                    body=body,
                    status=int(response["status"]["code"]),
                    headers=headers,
                    answer=answer,
                    stream_text=stream_text,
                )
            )
    return tuple(out)


def final_response(answer: Any, stream_text: str | None) -> dict[str, Any] | None:
    """A Responses answer's final response object (the body, or a stream's terminal event's `response`)."""
    if answer is None and stream_text:
        for line in stream_text.splitlines():
            data = _parse(line[5:]) if line.startswith("data:") else None
            if isinstance(data, dict) and data.get("type") in ("response.completed", "response.incomplete"):
                answer = data.get("response")
    return answer if isinstance(answer, dict) else None


def error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text
    error = body.get("error") if isinstance(body, dict) else None
    return str(error.get("message")) if isinstance(error, dict) else response.text


def _sim_ids(response: httpx.Response) -> list[str]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return answer_ids(None, response.text)
    return answer_ids(response.json(), None)


def _substitute(body: Any, ids: dict[str, str]) -> Any:
    text = json.dumps(body)
    for recorded, ours in ids.items():
        text = text.replace(f'"{recorded}"', f'"{ours}"')
    return json.loads(text)


def _responses_reply(answer: dict[str, Any]) -> tuple[list[str], list[ToolCall]]:
    output = [i for i in answer.get("output") or [] if isinstance(i, dict)]
    texts = [
        str(part.get("text", ""))
        for item in output
        if item.get("type") == "message"
        for part in item.get("content") or []
        if isinstance(part, dict) and part.get("type") == "output_text"
    ]
    calls = [
        ToolCall(str(i["name"]), str(i.get("arguments") or "{}"), str(i["call_id"]))
        for i in output
        if i.get("type") == "function_call"
    ]
    return texts, calls


def _anthropic_reply(answer: dict[str, Any]) -> tuple[list[str], list[ToolCall]]:
    blocks = [b for b in answer.get("content") or [] if isinstance(b, dict)]
    texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
    calls = [
        ToolCall(str(b["name"]), b.get("input") or {}, str(b["id"])) for b in blocks if b.get("type") == "tool_use"
    ]
    return texts, calls


def _gemini_reply(answer: dict[str, Any]) -> tuple[list[str], list[ToolCall]]:
    candidates = answer.get("candidates") or [{}]
    parts = [p for p in (candidates[0].get("content") or {}).get("parts") or [] if isinstance(p, dict)]
    texts = [str(p["text"]) for p in parts if p.get("text") is not None and not p.get("thought")]
    calls = [
        ToolCall(str(p["functionCall"]["name"]), p["functionCall"].get("args") or {}, p["functionCall"].get("id"))
        for p in parts
        if isinstance(p.get("functionCall"), dict)
    ]
    return texts, calls


def _chat_reply(answer: dict[str, Any]) -> tuple[list[str], list[ToolCall]]:
    choices = answer.get("choices") or [{}]
    message = choices[0].get("message") or {}
    texts = [str(message["content"])] if isinstance(message.get("content"), str) else []
    calls = [
        ToolCall(str(c["function"]["name"]), str(c["function"].get("arguments") or "{}"), str(c["id"]))
        for c in message.get("tool_calls") or []
    ]
    return texts, calls


_REPLIES = {"responses": _responses_reply, "anthropic": _anthropic_reply, "gemini": _gemini_reply, "chat": _chat_reply}


def _hit(query: str) -> list[dict[str, str]]:
    return [{"title": "Recorded search", "url": "https://example.com/recorded", "text": query}]


def _builtins(api: str, answer: dict[str, Any]) -> list[BuiltinCall]:
    """The service's own tool calls in a recorded answer, as scripted built-in calls."""
    calls: list[BuiltinCall] = []
    if api == "responses":
        for item in answer.get("output") or []:
            kind = item.get("type")
            if kind == "web_search_call":
                query = str((item.get("action") or {}).get("query") or "")
                calls.append(BuiltinCall("web_search", query, _hit(query)))
            elif kind == "code_interpreter_call":
                calls.append(BuiltinCall("code_execution", str(item.get("code") or ""), "done\n"))
            elif kind == "file_search_call":
                query = str((item.get("queries") or [""])[0])
                calls.append(BuiltinCall("file_search", query, [{**_hit(query)[0], "url": "file-recorded"}]))
    elif api == "anthropic":
        kinds = {"web_search": "web_search", "bash_code_execution": "code_execution", "web_fetch": "web_fetch"}
        for block in answer.get("content") or []:
            kind = kinds.get(str(block.get("name"))) if block.get("type") == "server_tool_use" else None
            if kind is not None:
                query = str(next(iter((block.get("input") or {"": ""}).values())))
                calls.append(BuiltinCall(kind, query, _hit(query) if kind == "web_search" else "done\n"))
    elif api == "gemini":
        candidate = (answer.get("candidates") or [{}])[0]
        for part in (candidate.get("content") or {}).get("parts") or []:
            if isinstance(part.get("executableCode"), dict):
                calls.append(BuiltinCall("code_execution", str(part["executableCode"].get("code")), "done\n"))
        for query in (candidate.get("groundingMetadata") or {}).get("webSearchQueries") or []:
            calls.append(BuiltinCall("web_search", str(query), _hit(str(query))))
    return calls


def recorded_reply(exchange: Exchange) -> Reply | None:
    """The answer the service gave, as a scripted reply (its text, tool calls with their ids, and calls of the
    service's own tools), so the
    simulator answers with the same kinds of content and a chained request's tool outputs answer calls the
    simulator's response made. None for a streamed answer of the APIs other than Responses."""
    answer = final_response(exchange.answer, exchange.stream_text) if exchange.api == "responses" else exchange.answer
    read = _REPLIES.get(exchange.api)
    if read is None or not isinstance(answer, dict):
        return None
    texts, calls = read(answer)
    builtin = _builtins(exchange.api, answer)
    if not (texts or calls or builtin):
        return None
    return Reply(text="".join(texts) if texts else None, tool_calls=calls, builtin=builtin)


def replay(client: httpx.Client, sim: Simulator, cassette: str) -> Iterator[tuple[Exchange, httpx.Response, set[str]]]:
    """Send a cassette's exchanges in order, the simulator answering each as the service did (its text and
    tool calls); yields each with the simulator's answer and the recorded ids of earlier answers the simulator
    refused (a request naming one cannot be replayed faithfully)."""
    ids: dict[str, str] = {}
    lost: set[str] = set()
    for exchange in (e for e in exchanges() if e.cassette == cassette):
        with sim.state.lock:
            sim.state.replies.clear()  # a refused request leaves its reply unused
        reply = recorded_reply(exchange)
        if reply is not None:
            sim.queue(reply)
        response = client.post(exchange.target, json=_substitute(exchange.body, ids))
        earlier = set(lost)
        recorded = answer_ids(exchange.answer, exchange.stream_text)
        if response.status_code == 200 and recorded:
            ids[recorded[0]] = _sim_ids(response)[0]
        elif response.status_code != 200:
            lost.update(recorded)
        yield exchange, response, earlier
