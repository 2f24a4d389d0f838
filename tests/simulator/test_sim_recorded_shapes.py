"""The simulator answers with the shapes the real services send, compared with the genuine recordings.

Each recorded request is replayed (see test_sim_recorded_requests.py) with the simulator scripted to give the
same text and tool calls; then, level by level (the response, its usage, each kind of item, block or part),
the simulator's answer must carry every key the recorded answer has, except the few it does not model
(`NOT_MODELLED`, each with its reason), and no key the service never sends. Streams are compared by their
sequence of event types, repeated deltas folded into one.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from simrecorded import MISSING, ROOT, Exchange, exchanges, final_response, recorded_reply, replay

from geppetto.simulator import Simulator

pytestmark = pytest.mark.skipif(not ROOT.is_dir(), reason=MISSING)

HEADERS = {"authorization": "Bearer sk-sim", "x-api-key": "sk-sim", "x-goog-api-key": "sim", "anthropic-version": "1"}
Levels = dict[str, set[str]]

# Keys the services send that the simulator does not model, by API and level, with the reason.
NOT_MODELLED: dict[str, dict[str, set[str]]] = {
    "responses": {
        # moderation results, Azure's content filters, hosted-tool billing, explicit cache options
        "response": {"moderation", "content_filters", "tool_usage", "prompt_cache_options"},
        # the service marks only some messages with a phase; the simulator's model has no commentary
        "item:message": {"phase"},
        # encrypted reasoning text shown only to some organisations
        "item:reasoning": {"content"},
    },
    "anthropic": {
        # context editing; per-iteration usage of compaction; server-tool usage of the advisor tool, which
        # the simulator does not serve (it counts its web searches and fetches)
        "message": {"context_management"},
        "usage": {"iterations", "server_tool_use"},
        # which tool runner called a tool (programmatic tool calling)
        "block:tool_use": {"caller"},
    },
    "gemini": {
        # Vertex AI's envelope and safety blocks
        "top": {"createTime", "promptFeedback"},
        # logprobs, finish messages, and the grounding of Gemini file search (file search stores are not served)
        "candidate": {"avgLogprobs", "finishMessage", "groundingMetadata", "logprobsResult"},
        "usage": {
            "cacheTokensDetails",
            "cachedContentTokenCount",
            "candidatesTokensDetails",
            "serviceTier",
            "toolUsePromptTokenCount",
            "toolUsePromptTokensDetails",
            "trafficType",
        },
    },
    "chat": {"top": {"time_info"}},  # a compatible provider's timing block
}


def _add(levels: Levels, name: str, value: Any) -> None:
    if isinstance(value, dict):
        levels.setdefault(name, set()).update(value)


def _responses_levels(answer: dict[str, Any]) -> Levels:
    levels: Levels = {}
    _add(levels, "response", answer)
    usage = answer.get("usage") or {}
    _add(levels, "usage", usage)
    _add(levels, "usage.input_tokens_details", usage.get("input_tokens_details"))
    _add(levels, "usage.output_tokens_details", usage.get("output_tokens_details"))
    for item in answer.get("output") or []:
        _add(levels, f"item:{item.get('type')}", item)
        for part in item.get("content") or [] if item.get("type") == "message" else []:
            _add(levels, f"part:{part.get('type')}", part)
    return levels


def _anthropic_levels(answer: dict[str, Any]) -> Levels:
    levels: Levels = {}
    _add(levels, "message", answer)
    usage = answer.get("usage") or {}
    _add(levels, "usage", usage)
    _add(levels, "usage.cache_creation", usage.get("cache_creation"))
    for block in answer.get("content") or []:
        _add(levels, f"block:{block.get('type')}", block)
    return levels


def _gemini_levels(answer: dict[str, Any]) -> Levels:
    levels: Levels = {}
    _add(levels, "top", answer)
    _add(levels, "usage", answer.get("usageMetadata"))
    for candidate in answer.get("candidates") or []:
        _add(levels, "candidate", candidate)
        for part in (candidate.get("content") or {}).get("parts") or []:
            if isinstance(part.get("functionCall"), dict):
                _add(levels, "functionCall", part["functionCall"])
    return levels


def _chat_levels(answer: dict[str, Any]) -> Levels:
    levels: Levels = {}
    _add(levels, "top", answer)
    _add(levels, "usage", answer.get("usage"))
    for choice in answer.get("choices") or []:
        _add(levels, "choice", choice)
        _add(levels, "message", choice.get("message"))
    return levels


LEVELS: dict[str, Callable[[dict[str, Any]], Levels]] = {
    "responses": _responses_levels,
    "anthropic": _anthropic_levels,
    "gemini": _gemini_levels,
    "chat": _chat_levels,
}


def _answer(exchange_api: str, answer: Any, stream_text: str | None) -> dict[str, Any] | None:
    return final_response(answer, stream_text) if exchange_api == "responses" else answer


def _sse_types(text: str) -> list[str]:
    """The event types of a stream, a run of the same type folded into one (delta counts differ)."""
    types: list[str] = []
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        try:
            data = json.loads(line[5:])
        except ValueError:
            continue
        kind = data.get("type") if isinstance(data, dict) else None
        if isinstance(kind, str) and (not types or types[-1] != kind):
            types.append(kind)
    return types


@pytest.fixture(scope="module")
def pairs(geppetto_sim_server: Simulator) -> list[tuple[Exchange, httpx.Response]]:
    """Every genuine accepted exchange whose replay the simulator accepted, with the simulator's answer."""
    geppetto_sim_server.reset()
    out = []
    with httpx.Client(base_url=geppetto_sim_server.url, headers=HEADERS, timeout=30) as client:
        for cassette in sorted({e.cassette for e in exchanges() if e.generation}):
            for exchange, response, _ in replay(client, geppetto_sim_server, cassette):
                if exchange.generation and exchange.status == 200 and response.status_code == 200:
                    out.append((exchange, response))
    geppetto_sim_server.reset()
    return out


def _sim_answer(exchange: Exchange, response: httpx.Response) -> dict[str, Any] | None:
    if exchange.stream_text is not None:
        return _answer(exchange.api, None, response.text) if exchange.api == "responses" else None
    body = response.json()
    return body if isinstance(body, dict) else None


def _recorded_union(api: str) -> Levels:
    union: dict[str, set[str]] = defaultdict(set)
    for exchange in exchanges():
        answer = _answer(exchange.api, exchange.answer, exchange.stream_text)
        if exchange.api == api and exchange.status == 200 and isinstance(answer, dict):
            for level, keys in LEVELS[api](answer).items():
                union[level] |= keys
    return dict(union)


def _comparable(pairs: list[tuple[Exchange, httpx.Response]], api: str) -> Iterator[tuple[str, Levels, Levels]]:
    for exchange, response in pairs:
        recorded = _answer(api, exchange.answer, exchange.stream_text)
        ours = _sim_answer(exchange, response)
        if exchange.api == api and isinstance(recorded, dict) and ours is not None:
            yield exchange.name, LEVELS[api](recorded), LEVELS[api](ours)


@pytest.mark.parametrize("api", sorted(LEVELS))
def test_answers_carry_every_key_the_service_sends(pairs: list[tuple[Exchange, httpx.Response]], api: str) -> None:
    missing = []
    compared = 0
    for name, recorded, ours in _comparable(pairs, api):
        compared += 1
        for level, keys in recorded.items():
            if level not in ours:
                continue  # a kind of item the simulator did not produce for this request
            lacking = keys - ours[level] - NOT_MODELLED.get(api, {}).get(level, set())
            if lacking:
                missing.append(f"{name} {level}: {sorted(lacking)}")
    assert compared >= 10, f"only {compared} {api} answers to compare"
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("api", sorted(LEVELS))
def test_answers_carry_no_key_the_service_never_sends(pairs: list[tuple[Exchange, httpx.Response]], api: str) -> None:
    union = _recorded_union(api)
    invented = set()
    for _, _, ours in _comparable(pairs, api):
        for level, keys in ours.items():
            if level in union:
                invented |= {f"{level}.{k}" for k in keys - union[level]}
    assert not invented, sorted(invented)


def test_stream_event_sequences_match_the_recordings(pairs: list[tuple[Exchange, httpx.Response]]) -> None:
    """For a streamed answer with the same kinds of content, the same event types in the same order."""
    compared = 0
    different = []
    for exchange, response in pairs:
        if exchange.stream_text is None or exchange.api not in ("responses", "anthropic"):
            continue
        if exchange.body.get("background"):
            continue  # a background response streams `response.queued` first; not compared here
        recorded = _sse_types(exchange.stream_text)
        ours = _sse_types(response.text)
        if recorded_reply(exchange) is None or not _same_content_kinds(exchange, response):
            continue
        compared += 1
        if [t for t in recorded if t != "ping"] != [t for t in ours if t != "ping"]:
            different.append(f"{exchange.name}\n  recorded {recorded}\n  simulator {ours}")
    assert compared >= 3
    assert not different, "\n".join(different)


def _same_content_kinds(exchange: Exchange, response: httpx.Response) -> bool:
    """Whether the simulator's stream produced the same kinds of output (items, blocks) as the recording."""

    def kinds(text: str) -> list[str]:
        found = []
        for line in text.splitlines():
            data = json.loads(line[5:]) if line.startswith("data:") and line[5:].strip() else None
            if isinstance(data, dict) and data.get("type") == "response.output_item.added":
                found.append(data["item"]["type"])
            elif isinstance(data, dict) and data.get("type") == "content_block_start":
                found.append(data["content_block"]["type"])
        return found

    assert exchange.stream_text is not None
    return kinds(exchange.stream_text) == kinds(response.text)


def _event_keys(text: str) -> Levels:
    """Per event type (and per delta, block or part kind inside it), the keys the stream's events carry."""
    keys: Levels = {}
    for line in text.splitlines():
        raw = line[5:].strip() if line.startswith("data:") else ""
        data = json.loads(raw) if raw and raw != "[DONE]" else None
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            continue
        kind = data["type"]
        _add(keys, kind, data)
        for inner in ("delta", "content_block", "part"):
            if isinstance(data.get(inner), dict):
                _add(keys, f"{kind}.{inner}:{data[inner].get('type')}", data[inner])
    return keys


# Event keys not modelled: a text block opens with `citations: []` only when the service cited a search,
# which the replay (scripted with the recorded text alone) does not.
EVENTS_NOT_MODELLED = {"content_block_start.content_block:text": {"citations"}}


def test_stream_events_carry_every_key_the_service_sends(pairs: list[tuple[Exchange, httpx.Response]]) -> None:
    missing = []
    compared = 0
    for exchange, response in pairs:
        if exchange.stream_text is None or exchange.api not in ("responses", "anthropic"):
            continue
        recorded, ours = _event_keys(exchange.stream_text), _event_keys(response.text)
        for level, keys in recorded.items():
            if level in ours:
                compared += 1
                lacking = keys - ours[level] - EVENTS_NOT_MODELLED.get(level, set())
                if lacking:
                    missing.append(f"{exchange.name} {level}: {sorted(lacking)}")
    assert compared >= 20
    assert not missing, "\n".join(missing)
