"""A port of the Open Responses compliance suite's checks, run against the simulator over HTTP and WebSocket.

The suite (``src/lib/compliance-tests.ts`` of the Open Responses repository, TypeScript run with bun) is not
published as a package, so this file is our own re-implementation of what each of its tests sends and
checks, one pytest case per suite test id and transport. It follows the suite at commit
``18e565604fdf7a08ad3a06bbc30d1ddaee999ea4`` (its eleven tests) plus ``tool-calling-streaming`` from
commit ``0cb939ccf839234347b4f0c317569b49fad8fd0e``; docs/simulator.md says which version and what
differs. Each case checks the final response against the spec's ``ResponseResource`` required fields and
types, every streamed event against its known types and ``sequence_number``, then the test's own
validators (output present, status ``completed``, a ``function_call`` item, the function-call events).

``http`` sends the request as the suite does (``POST /v1/responses``, ``stream`` as the test sets it);
``websocket`` sends the same body as a ``response.create`` message on one connection per test (a socket
always streams, so every case there checks the events as well as the final response).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from geppetto.simulator import Simulator

sync_client = pytest.importorskip("websockets.sync.client")

MODEL = "sim-1"
AUTH = {"authorization": "Bearer sk-test"}
TERMINAL = ("response.completed", "response.failed", "response.incomplete")
_TOOL_STEPS = ("in_progress", "searching", "completed")

# The streaming event types the suite's event schema union accepts, with the hosted tools' call events the
# spec's newer event schemas add.
EVENT_TYPES = {
    *(f"response.{tool}_call.{step}" for tool in ("file_search", "web_search") for step in _TOOL_STEPS),
    "response.created",
    "response.queued",
    "response.in_progress",
    "response.completed",
    "response.failed",
    "response.incomplete",
    "response.output_item.added",
    "response.output_item.done",
    "response.content_part.added",
    "response.content_part.done",
    "response.output_text.delta",
    "response.output_text.done",
    "response.refusal.delta",
    "response.refusal.done",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_part.done",
    "response.reasoning.delta",
    "response.reasoning.done",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.output_text.annotation.added",
    "error",
}

_STR, _INT, _NUM, _BOOL, _LIST, _DICT, _NULL = str, int, (int, float), bool, list, dict, type(None)

# The ResponseResource fields the spec requires, with the JSON types each may take.
RESOURCE_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (_STR,),
    "object": (_STR,),
    "created_at": (_INT,),
    "completed_at": (_INT, _NULL),
    "status": (_STR,),
    "incomplete_details": (_DICT, _NULL),
    "model": (_STR,),
    "previous_response_id": (_STR, _NULL),
    "instructions": (_STR, _LIST, _NULL),
    "output": (_LIST,),
    "error": (_DICT, _NULL),
    "tools": (_LIST,),
    "tool_choice": (_STR, _DICT),
    "truncation": (_STR,),
    "parallel_tool_calls": (_BOOL,),
    "text": (_DICT,),
    "top_p": _NUM,
    "presence_penalty": _NUM,
    "frequency_penalty": _NUM,
    "top_logprobs": (_INT,),
    "temperature": _NUM,
    "reasoning": (_DICT, _NULL),
    "usage": (_DICT, _NULL),
    "max_output_tokens": (_INT, _NULL),
    "max_tool_calls": (_INT, _NULL),
    "store": (_BOOL,),
    "background": (_BOOL,),
    "service_tier": (_STR,),
    "metadata": (_DICT,),
    "safety_identifier": (_STR, _NULL),
    "prompt_cache_key": (_STR, _NULL),
}
USAGE_FIELDS = ("input_tokens", "output_tokens", "total_tokens", "input_tokens_details", "output_tokens_details")


def resource_errors(obj: Any) -> list[str]:
    """What in ``obj`` breaks the spec's ResponseResource (required fields, their types, the nested shapes)."""
    if not isinstance(obj, dict):
        return [f"the final response is {type(obj).__name__}, not an object"]
    errors = []
    for name, types in RESOURCE_FIELDS.items():
        if name not in obj:
            errors.append(f"{name}: required")
            continue
        value = obj[name]
        ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
        if not ok:
            errors.append(f"{name}: {value!r} is not of type {'/'.join(t.__name__ for t in types)}")
    if obj.get("object") != "response":
        errors.append(f"object: {obj.get('object')!r} is not 'response'")
    if obj.get("truncation") not in ("auto", "disabled"):
        errors.append(f"truncation: {obj.get('truncation')!r}")
    if isinstance(obj.get("usage"), dict):
        errors += [f"usage.{k}: required" for k in USAGE_FIELDS if k not in obj["usage"]]
    for n, item in enumerate(obj.get("output") or []):
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            errors.append(f"output.{n}: an item without a type")
            continue
        need = {"message": ("id", "status", "role", "content"), "function_call": ("id", "call_id", "name", "arguments")}
        errors += [f"output.{n}.{k}: required" for k in need.get(item["type"], ()) if k not in item]
    for n, tool in enumerate(obj.get("tools") or []):
        if isinstance(tool, dict) and tool.get("type") == "function":
            errors += [f"tools.{n}.{k}: required" for k in ("name", "parameters", "strict") if k not in tool]
    return errors


def event_errors(events: list[dict[str, Any]]) -> list[str]:
    errors = []
    for n, event in enumerate(events):
        kind = event.get("type")
        if kind not in EVENT_TYPES:
            errors.append(f"event {n}: unknown type {kind!r}")
        elif kind != "error" and not isinstance(event.get("sequence_number"), int):
            errors.append(f"event {n} ({kind}): no integer sequence_number")
    return errors


@dataclass
class Result:
    """One request's answer: the final response and, when it streamed, its events."""

    response: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    streamed: bool = False


class Failed(AssertionError):
    """A request the server refused (an HTTP error status, an error event) or answered off the spec."""


class HttpClient:
    def __init__(self, sim: Simulator) -> None:
        self.http = httpx.Client(base_url=sim.openai_url, headers=AUTH, timeout=10)

    def create(self, body: dict[str, Any], streaming: bool = False) -> Result:
        if not streaming:
            r = self.http.post("/responses", json={**body, "stream": False})
            if r.status_code != 200:
                raise Failed(f"HTTP {r.status_code}: {r.text}")
            return Result(r.json())
        events: list[dict[str, Any]] = []
        with self.http.stream("POST", "/responses", json={**body, "stream": True}) as r:
            if r.status_code != 200:
                raise Failed(f"HTTP {r.status_code}: {r.read().decode()}")
            for line in r.iter_lines():
                if line.startswith("data:") and line[5:].strip() != "[DONE]":
                    events.append(json.loads(line[5:].strip()))
        final = [e["response"] for e in events if e.get("type") in TERMINAL]
        if not final:
            raise Failed(f"the stream ended without a terminal event: {[e.get('type') for e in events]}")
        return Result(final[-1], events, True)

    def close(self) -> None:
        self.http.close()


class SocketClient:
    def __init__(self, sim: Simulator) -> None:
        self.opened = contextlib.ExitStack()
        connect = sync_client.connect(sim.websocket_url, additional_headers=AUTH, open_timeout=5)
        self.ws = self.opened.enter_context(connect)

    def create(self, body: dict[str, Any], streaming: bool = False) -> Result:
        self.ws.send(json.dumps({"type": "response.create", **body}))
        events = []
        while True:
            event = json.loads(self.ws.recv(timeout=5))
            events.append(event)
            if event.get("type") == "error":
                raise Failed(f"error event: {event}")
            if event.get("type") in TERMINAL:
                return Result(event["response"], events, True)

    def close(self) -> None:
        self.opened.close()


Client = HttpClient | SocketClient


def has_output(r: Result) -> list[str]:
    return [] if r.response.get("output") else ["Response has no output items"]


def completed(r: Result) -> list[str]:
    status = r.response.get("status")
    return [] if status == "completed" else [f'Expected status "completed" but got "{status}"']


def has_item(kind: str) -> Callable[[Result], list[str]]:
    def check(r: Result) -> list[str]:
        found = any(i.get("type") == kind for i in r.response.get("output") or [])
        return [] if found else [f'Expected output item of type "{kind}" but none found']

    return check


def streamed(r: Result) -> list[str]:
    return [] if r.events else ["No streaming events received"]


def function_call_events(r: Result) -> list[str]:
    kinds = [e.get("type") for e in r.events]
    item_kinds = {(e.get("type"), (e.get("item") or {}).get("type")) for e in r.events}
    errors = []
    if ("response.output_item.added", "function_call") not in item_kinds:
        errors.append("Missing response.output_item.added event with function_call item")
    for kind in ("response.function_call_arguments.delta", "response.function_call_arguments.done"):
        if kind not in kinds:
            errors.append(f"Missing {kind} event")
    if ("response.output_item.done", "function_call") not in item_kinds:
        errors.append("Missing response.output_item.done event with function_call item")
    return errors


def user(content: Any) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": content}


WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a location",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"}},
        "required": ["location"],
    },
}
# A 1x1 PNG and a one-page PDF whose text is "Title: Fixture": small inline attachments like the suite's.
PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
PDF = "data:application/pdf;base64,JVBERi0xLjEKMSAwIG9iago8PCAvVHlwZSAvQ2F0YWxvZyA+PgplbmRvYmoKdHJhaWxlcgo8PCAvUm9vdCAxIDAgUiA+PgolJUVPRgo="


def verdict(r: Result, *validators: Callable[[Result], list[str]]) -> list[str]:
    errors = resource_errors(r.response) + (event_errors(r.events) if r.streamed else [])
    for validate in validators:
        errors += validate(r)
    return errors


def single(
    body: Callable[[], dict[str, Any]], *validators: Callable[[Result], list[str]], streaming: bool = False
) -> Callable[[Client], list[str]]:
    def run(client: Client) -> list[str]:
        return verdict(client.create({"model": MODEL, **body()}, streaming), *validators)

    return run


def previous_response_id(client: Client) -> list[str]:
    first = client.create({"model": MODEL, "input": "Remember this code word: papaya. Reply with only OK."})
    errors = resource_errors(first.response)
    second = client.create(
        {"model": MODEL, "previous_response_id": first.response["id"], "input": "What code word did I ask?"}
    )
    return errors + verdict(second, has_output, completed)


def function_call_roundtrip(client: Client) -> list[str]:
    first = client.create(
        {
            "model": MODEL,
            "input": "Use the weather tool to get the temperature in San Francisco.",
            "tools": [WEATHER],
            "tool_choice": {"type": "function", "name": "get_weather"},
        }
    )
    calls = [i for i in first.response.get("output") or [] if i.get("type") == "function_call" and "call_id" in i]
    if not calls:
        return ["First response did not include a function_call with call_id"]
    answer = {"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "64 degrees and clear"}
    second = client.create({"model": MODEL, "previous_response_id": first.response["id"], "input": [answer]})
    return resource_errors(first.response) + verdict(second, has_output, completed)


CHECKS: dict[str, Callable[[Client], list[str]]] = {
    "basic-response": single(lambda: {"input": [user("Say hello in exactly 3 words.")]}, has_output, completed),
    "streaming-response": single(lambda: {"input": [user("Count from 1 to 5.")]}, streamed, completed, streaming=True),
    "system-prompt": single(
        lambda: {
            "input": [
                {"type": "message", "role": "system", "content": "You are a pirate. Always respond in pirate speak."},
                user("Say hello."),
            ]
        },
        has_output,
        completed,
    ),
    "tool-calling": single(
        lambda: {"input": [user("What's the weather like in San Francisco?")], "tools": [WEATHER]},
        has_output,
        has_item("function_call"),
    ),
    "tool-calling-streaming": single(
        lambda: {"input": [user("What's the weather like in San Francisco?")], "tools": [WEATHER]},
        streamed,
        function_call_events,
        streaming=True,
    ),
    "function-call-roundtrip": function_call_roundtrip,
    "image-input": single(
        lambda: {
            "input": [
                user(
                    [
                        {"type": "input_text", "text": "What do you see in this image? Answer in one sentence."},
                        {"type": "input_image", "image_url": PNG},
                    ]
                )
            ]
        },
        has_output,
        completed,
    ),
    "file-input": single(
        lambda: {
            "input": [
                user(
                    [
                        {"type": "input_text", "text": "Read the attached file and answer with its title only."},
                        {"type": "input_file", "filename": "fixture.pdf", "file_data": PDF},
                    ]
                )
            ]
        },
        has_output,
        completed,
    ),
    "multi-turn": single(
        lambda: {
            "input": [
                user("My name is Alice."),
                {"type": "message", "role": "assistant", "content": "Hello Alice! How can I help you today?"},
                user("What is my name?"),
            ]
        },
        has_output,
        completed,
    ),
    "previous-response-id": previous_response_id,
    # The suite's two optional tests (it skips them unless configured); the simulator runs both tools.
    "file-search": single(
        lambda: {
            "input": "Search the configured vector store for relevant content and summarize one result.",
            "tools": [{"type": "file_search", "vector_store_ids": ["vs_fixture"]}],
            "tool_choice": {"type": "file_search"},
            "include": ["file_search_call.results"],
        },
        has_output,
        has_item("file_search_call"),
    ),
    "offline-web-search": single(
        lambda: {
            "input": "Find the most relevant cached result for geppetto.",
            "tools": [{"type": "web_search", "external_web_access": False}],
            "tool_choice": {"type": "web_search"},
            "include": ["web_search_call.action.sources"],
        },
        has_output,
        has_item("web_search_call"),
    ),
}


@pytest.fixture(params=["http", "websocket"])
def client(request: pytest.FixtureRequest, geppetto_sim: Simulator) -> Iterator[Client]:
    made: Client = HttpClient(geppetto_sim) if request.param == "http" else SocketClient(geppetto_sim)
    try:
        yield made
    finally:
        made.close()


@pytest.mark.parametrize("check", list(CHECKS))
def test_open_responses_check(check: str, client: Client) -> None:
    errors = CHECKS[check](client)
    assert errors == [], f"{check}: " + "; ".join(errors)


def test_the_checks_fail_a_response_off_the_spec() -> None:
    good = {name: None for name in RESOURCE_FIELDS} | {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "m",
        "output": [],
        "tools": [],
        "tool_choice": "auto",
        "truncation": "disabled",
        "parallel_tool_calls": True,
        "text": {},
        "top_p": 1,
        "presence_penalty": 0,
        "frequency_penalty": 0,
        "top_logprobs": 0,
        "temperature": 1,
        "store": True,
        "background": False,
        "service_tier": "default",
        "metadata": {},
    }
    assert resource_errors(good) == []
    bad = {k: v for k, v in good.items() if k != "completed_at"} | {
        "store": 1,
        "tools": [{"type": "function", "name": "f", "parameters": {}}],
    }
    assert resource_errors(bad) == [
        "completed_at: required",
        "store: 1 is not of type bool",
        "tools.0.strict: required",
    ]
    assert event_errors([{"type": "response.created"}, {"type": "response.bogus", "sequence_number": 1}]) == [
        "event 0 (response.created): no integer sequence_number",
        "event 1: unknown type 'response.bogus'",
    ]
