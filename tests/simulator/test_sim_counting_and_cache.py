"""The simulator's counting endpoints and prompt cache, over HTTP as a client sees them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from geppetto.simulator import Simulator

LONG = " ".join(f"rule{i} applies." for i in range(700))
MARK = {"type": "ephemeral"}


@pytest.fixture
def claude(geppetto_sim: Simulator) -> Iterator[httpx.Client]:
    headers = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
    with httpx.Client(base_url=geppetto_sim.url, headers=headers, timeout=10) as client:
        yield client


@pytest.fixture
def gemini(geppetto_sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=geppetto_sim.url, headers={"x-goog-api-key": "g"}, timeout=10) as client:
        yield client


def _message(system: Any, text: str) -> dict[str, Any]:
    return {
        "model": "sim-1",
        "max_tokens": 64,
        "system": system,
        "messages": [{"role": "user", "content": [{"type": "text", "text": text, "cache_control": MARK}]}],
    }


def test_anthropic_count_tokens_matches_the_usage_of_the_same_request(claude: httpx.Client) -> None:
    body = _message(LONG, "Hello")
    counted = claude.post("/v1/messages/count_tokens", json={k: v for k, v in body.items() if k != "max_tokens"})
    assert counted.status_code == 200, counted.text
    usage = claude.post("/v1/messages", json=body).json()["usage"]
    total = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    assert counted.json() == {"input_tokens": total}


def test_anthropic_marked_prefix_is_written_then_read(claude: httpx.Client) -> None:
    system = [{"type": "text", "text": LONG, "cache_control": MARK}]
    first = claude.post("/v1/messages", json=_message(system, "Hello")).json()["usage"]
    second = claude.post("/v1/messages", json=_message(system, "Something else")).json()["usage"]
    assert first["cache_creation_input_tokens"] > 1024 and first["cache_read_input_tokens"] == 0
    # the system prompt's prefix is read back; the new message's mark writes the rest
    assert second["cache_read_input_tokens"] > 1024
    assert second["cache_read_input_tokens"] < first["cache_creation_input_tokens"]


def test_anthropic_unmarked_or_short_prompts_are_not_cached(claude: httpx.Client) -> None:
    body = _message("short", "Hello")
    for _ in range(2):
        usage = claude.post("/v1/messages", json=body).json()["usage"]
        assert usage["cache_creation_input_tokens"] == usage["cache_read_input_tokens"] == 0
    unmarked = {**_message(LONG, "Hi"), "messages": [{"role": "user", "content": "Hi"}]}
    for _ in range(2):
        usage = claude.post("/v1/messages", json=unmarked).json()["usage"]
        assert usage["cache_read_input_tokens"] == 0


def test_gemini_count_tokens_takes_contents_or_a_whole_request(gemini: httpx.Client) -> None:
    contents = [{"role": "user", "parts": [{"text": "Hello there"}]}]
    request = {"contents": contents, "systemInstruction": {"parts": [{"text": LONG}]}}
    plain = gemini.post("/v1beta/models/sim-1:countTokens", json={"contents": contents}).json()["totalTokens"]
    whole = gemini.post("/v1beta/models/sim-1:countTokens", json={"generateContentRequest": request}).json()
    usage = gemini.post("/v1beta/models/sim-1:generateContent", json=request).json()["usageMetadata"]
    assert whole["totalTokens"] == usage["promptTokenCount"] > plain > 0
    bad = gemini.post("/v1beta/models/sim-1:countTokens", json={})
    assert bad.status_code == 400 and "contents" in bad.text


def test_gemini_reports_implicit_cache_reads_of_a_repeated_prefix(gemini: httpx.Client) -> None:
    def ask(text: str) -> dict[str, Any]:
        request = {
            "contents": [{"role": "user", "parts": [{"text": text}]}],
            "systemInstruction": {"parts": [{"text": LONG}]},
        }
        return dict(gemini.post("/v1beta/models/sim-1:generateContent", json=request).json()["usageMetadata"])

    assert "cachedContentTokenCount" not in ask("first")
    assert ask("second")["cachedContentTokenCount"] > 1024


def test_openai_endpoints_report_automatic_cache_reads_per_cache_key(geppetto_sim: Simulator) -> None:
    headers = {"authorization": "Bearer sk-test"}
    with httpx.Client(base_url=geppetto_sim.openai_url, headers=headers, timeout=10) as client:

        def responses(text: str, key: str) -> int:
            body = {"model": "sim-1", "instructions": LONG, "input": text, "prompt_cache_key": key}
            usage = client.post("/responses", json=body).json()["usage"]
            return int(usage["input_tokens_details"]["cached_tokens"])

        def chat(text: str) -> int:
            messages = [{"role": "system", "content": LONG}, {"role": "user", "content": text}]
            usage = client.post("/chat/completions", json={"model": "sim-1", "messages": messages}).json()["usage"]
            return int(usage["prompt_tokens_details"]["cached_tokens"])

        assert responses("first", "a") == 0
        assert responses("second", "a") > 1024
        assert responses("third", "b") == 0  # another key: another cache
        assert chat("first") == 0 and chat("second") > 1024
