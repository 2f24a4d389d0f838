"""The real recorded provider traffic (loaded by ``tests/recorded.py``) sent to the simulator: the exchanges
it serves, each answer scripted as the service gave it, and a cassette replayed in order with the
simulator's ids in place of the service's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from geppetto.simulator import BuiltinCall, Reply, Simulator, ToolCall
from recorded import MISSING, ROOT, Exchange
from recorded import exchanges as all_exchanges

__all__ = [
    "MISSING",
    "ROOT",
    "Exchange",
    "answer_ids",
    "error_message",
    "exchanges",
    "final_response",
    "recorded_reply",
    "replay",
]


def exchanges() -> tuple[Exchange, ...]:
    """Every genuine recorded exchange with an API the simulator serves, in recorded order."""
    return tuple(e for e in all_exchanges() if e.served)


def answer_ids(answer: Any, stream_text: str | None) -> list[str]:
    """The ids an answer introduces that later requests may name: the response or conversation id, then
    its output items' ids (from the JSON body, or from a stream's final response event)."""
    answer = final_response(answer, stream_text)
    if answer is None or not isinstance(answer.get("id"), str):
        return []
    items = answer.get("output") if isinstance(answer.get("output"), list) else []
    return [answer["id"], *(str(i["id"]) for i in items if isinstance(i, dict) and isinstance(i.get("id"), str))]


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


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
