"""Anthropic Messages through plain HTTP: tool loop, thinking signatures, adjacency errors, streaming."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from anthropic.types import Message
from simhelp import sse_events

from geppetto.simulator import Reply, Simulator

TOOLS = [
    {
        "name": "get_weather",
        "description": "Get the weather for a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]
THINKING = {"type": "enabled", "budget_tokens": 1024}


@pytest.fixture
def ant(geppetto_sim: Simulator) -> Iterator[httpx.Client]:
    headers = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
    with httpx.Client(base_url=geppetto_sim.url, headers=headers, timeout=10) as client:
        yield client


def _post(client: httpx.Client, messages: list[Any], **extra: Any) -> httpx.Response:
    return client.post(
        "/v1/messages", json={"model": "claude-sim", "max_tokens": 2048, "messages": messages, "tools": TOOLS, **extra}
    )


def _error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _without_request_id(body: dict[str, Any]) -> dict[str, Any]:
    assert body["request_id"].startswith("req_")
    return {k: v for k, v in body.items() if k != "request_id"}


def test_tool_loop_with_thinking(ant: httpx.Client) -> None:
    messages: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    first = _post(ant, messages, thinking=THINKING).json()
    thinking, tool_use = first["content"]
    assert thinking["type"] == "thinking" and thinking["signature"]
    assert tool_use == {"type": "tool_use", "id": tool_use["id"], "name": "get_weather", "input": {"city": "Oslo"}}
    assert first["stop_reason"] == "tool_use"
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use["id"], "content": "5C"}]}
    second = _post(ant, [*messages, {"role": "assistant", "content": first["content"]}, result], thinking=THINKING)
    assert second.status_code == 200
    assert second.json()["content"][1] == {"type": "text", "text": "Here is what the tools returned. get_weather: 5C."}
    assert second.json()["stop_reason"] == "end_turn"

    dropped = _post(ant, [*messages, {"role": "assistant", "content": [tool_use]}, result], thinking=THINKING)
    assert dropped.status_code == 400
    message = _without_request_id(dropped.json())["error"]["message"]
    assert message.startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is "
        "enabled, a final `assistant` message must start with a thinking block"
    )
    tampered = {**thinking, "thinking": "edited"}
    bad = _post(ant, [*messages, {"role": "assistant", "content": [tampered, tool_use]}, result], thinking=THINKING)
    assert (bad.status_code, _without_request_id(bad.json())) == (
        400,
        _error("messages.1.content.0: Invalid `signature` in `thinking` block"),
    )


def test_unanswered_and_orphan_tool_blocks(ant: httpx.Client) -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "x"}}
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": "and?"},
    ]
    r = _post(ant, messages)
    assert r.status_code == 400
    assert _without_request_id(r.json()) == _error(
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. Each `tool_use` "
        "block must have a corresponding `tool_result` block in the next message."
    )
    orphan = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "x"},
                {"type": "tool_result", "tool_use_id": "toolu_9", "content": "1"},
            ],
        }
    ]
    r = _post(ant, orphan)
    assert r.status_code == 400
    assert _without_request_id(r.json()) == _error(
        "messages.0.content.1: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9. Each `tool_result` block "
        "must have a corresponding `tool_use` block in the previous message."
    )


def test_missing_fields_and_auth(ant: httpx.Client, geppetto_sim: Simulator) -> None:
    r = ant.post("/v1/messages", json={"model": "claude-sim", "messages": [{"role": "user", "content": "hi"}]})
    assert (r.status_code, _without_request_id(r.json())) == (400, _error("max_tokens: Field required"))
    r = httpx.post(geppetto_sim.url + "/v1/messages", json={"model": "m", "max_tokens": 5, "messages": []})
    assert (r.status_code, _without_request_id(r.json())) == (
        401,
        _error("x-api-key header is required", "authentication_error"),
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"messages": [{"role": "system", "content": "x"}]}, "messages.0.role: Input should be 'user' or 'assistant'"),
        ({"max_tokens": 0}, "max_tokens: Input should be greater than or equal to 1"),
        ({"messages": []}, "messages: at least one message is required"),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1000}},
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 1.5}},
            "thinking.enabled.budget_tokens: Input should be a valid integer",
        ),
        ({"thinking": {"type": "enabled"}}, "thinking.enabled.budget_tokens: Field required"),
        (
            {"max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 2048}},
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at "
            "https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size",
        ),
    ],
)
def test_request_rejections(ant: httpx.Client, change: dict[str, Any], message: str) -> None:
    change = dict(change)
    messages = change.pop("messages", [{"role": "user", "content": "hi"}])
    r = _post(ant, messages, **change)
    assert (r.status_code, _without_request_id(r.json())) == (400, _error(message))


def test_stream_event_sequence(ant: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(Reply(text="Hi there", reasoning="Hmm"))
    with ant.stream(
        "POST",
        "/v1/messages",
        json={"model": "claude-sim", "max_tokens": 64, "messages": [{"role": "user", "content": "x"}], "stream": True},
    ) as r:
        events = sse_events(r.read().decode())
    assert [name for name, _ in events] == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert [d["delta"] for n, d in events if n == "content_block_delta"][:2] == [
        {"type": "thinking_delta", "thinking": "Hmm"},
        {
            "type": "signature_delta",
            "signature": events[4][1]["delta"]["signature"],
        },
    ]
    assert events[-2][1]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert events[0][1]["message"]["content"] == []


def _diagnosed(client: httpx.Client, messages: list[Any], previous: str | None, **extra: Any) -> dict[str, Any]:
    r = _post(client, messages, diagnostics={"previous_message_id": previous}, **extra)
    assert r.status_code == 200, r.text
    answer = r.json()
    Message.model_validate(answer)  # the SDK's Message type, diagnostics included
    return dict(answer)


def test_cache_diagnostics_name_the_first_divergence(ant: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(*[Reply(text="Sunny.") for _ in range(6)])
    ask = [{"role": "user", "content": "Weather in Paris?"}]
    first = _diagnosed(ant, ask, None)
    assert first["diagnostics"] is None  # opted in, nothing to compare with
    grown = [*ask, {"role": "assistant", "content": first["content"]}, {"role": "user", "content": "And Lyon?"}]
    second = _diagnosed(ant, grown, first["id"])
    assert second["diagnostics"] is None  # only appended: nothing diverged
    edited = [{"role": "user", "content": "Weather in Nice?"}, *grown[1:]]
    reason = _diagnosed(ant, edited, first["id"])["diagnostics"]["cache_miss_reason"]
    assert reason["type"] == "messages_changed" and reason["cache_missed_input_tokens"] > 0
    moved = _diagnosed(ant, grown, first["id"], model="claude-sim-2")["diagnostics"]["cache_miss_reason"]
    assert moved["type"] == "model_changed"
    lost = _diagnosed(ant, grown, "msg_unknown")["diagnostics"]
    assert lost == {"cache_miss_reason": {"type": "previous_message_not_found"}}
    plain = _post(ant, grown).json()
    assert "diagnostics" not in plain  # not asked: nothing said, nothing kept


def test_cache_diagnostics_arrive_on_message_start_in_a_stream(ant: httpx.Client, geppetto_sim: Simulator) -> None:
    geppetto_sim.queue(*[Reply(text="Sunny.") for _ in range(3)])
    first = _diagnosed(ant, [{"role": "user", "content": "x"}], None)
    geppetto_sim.plant_divergence(first["id"], "system")
    body = {
        "model": "claude-sim",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": first["content"]},
                     {"role": "user", "content": "y"}],
        "tools": TOOLS,
        "stream": True,
        "diagnostics": {"previous_message_id": first["id"]},
    }  # fmt: skip
    with ant.stream("POST", "/v1/messages", json=body) as r:
        events = sse_events(r.read().decode())
    start = events[0][1]["message"]
    assert start["diagnostics"]["cache_miss_reason"]["type"] == "system_changed"
    with pytest.raises(KeyError, match="did not send diagnostics"):
        geppetto_sim.plant_divergence(str(_post(ant, [{"role": "user", "content": "z"}]).json()["id"]), "tools")
