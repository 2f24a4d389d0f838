"""Every genuine recorded request the real services accepted is accepted by the simulator.

Each cassette of ../shared/reference/recorded is replayed in order against the simulator; ids the real
service gave (a response or conversation a later request names) are mapped to the ones the simulator gave.
The only refusals allowed are of what only the real service can verify: its thinking signatures, thought
signatures and encrypted reasoning or compaction content, and the error must say so, in the service's words.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from simrecorded import MISSING, ROOT, Exchange, error_message, exchanges, replay

from geppetto.simulator import Simulator

pytestmark = pytest.mark.skipif(not ROOT.is_dir(), reason=MISSING)

HEADERS = {"authorization": "Bearer sk-sim", "x-api-key": "sk-sim", "x-goog-api-key": "sim", "anthropic-version": "1"}
# The services' own words for content only they can verify, per API.
UNVERIFIABLE = {
    "anthropic": ("Invalid `signature` in `thinking` block",),
    "gemini": ("Corrupted thought signature.",),
    "responses": ("could not be verified.",),
}
UNVERIFIABLE["count_tokens"] = UNVERIFIABLE["anthropic"]
UNVERIFIABLE["compact"] = UNVERIFIABLE["responses"]
_SIGNED_FIELDS = ('"signature"', '"thoughtSignature"', '"encrypted_content"')


def _cassettes() -> list[str]:
    if not ROOT.is_dir():
        return []
    names = {e.cassette for e in exchanges() if e.status == 200}
    return sorted(names)


def refusal_allowed(exchange: Exchange, response: httpx.Response, lost: set[str]) -> bool:
    """A refusal of content only the real service can verify, said in the service's words, or of a request
    naming an earlier answer refused for that reason."""
    message = error_message(response)
    body = json.dumps(exchange.body)
    if any(f'"{i}"' in body for i in lost) and "not found" in message:
        return True
    wording = UNVERIFIABLE.get(exchange.api, ())
    return any(w in message for w in wording) and any(field in body for field in _SIGNED_FIELDS)


@pytest.fixture
def client(geppetto_sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=geppetto_sim.url, headers=HEADERS, timeout=30) as c:
        yield c


@pytest.mark.parametrize("cassette", _cassettes())
def test_recorded_requests_are_accepted(client: httpx.Client, geppetto_sim: Simulator, cassette: str) -> None:
    refused = []
    for exchange, response, lost in replay(client, geppetto_sim, cassette):
        if exchange.status != 200 or response.status_code == 200:
            continue
        if not refusal_allowed(exchange, response, lost):
            refused.append(f"{exchange.name}: {response.status_code} {error_message(response)}")
    assert not refused, "\n".join(refused)


def test_unverifiable_content_is_refused_in_the_services_words(client: httpx.Client, geppetto_sim: Simulator) -> None:
    """The recorded thinking signatures, thought signatures and encrypted reasoning are the real services';
    the simulator cannot verify them and says exactly that."""
    seen = set()
    for cassette in _cassettes():
        for exchange, response, lost in replay(client, geppetto_sim, cassette):
            if exchange.status == 200 and response.status_code == 400 and not lost:
                assert refusal_allowed(exchange, response, lost), exchange.name
                seen.add(exchange.api)
    assert seen == {"anthropic", "gemini", "responses"}


def test_a_foreign_signature_alone_is_what_gets_refused(client: httpx.Client) -> None:
    """Drop the unverifiable thinking blocks from a refused Claude request and it is accepted: the signature,
    nothing else in the recorded request, was the problem."""
    exchange = next(
        e for e in exchanges() if e.cassette.endswith("test_anthropic_tool_with_thinking.yaml") and e.index == 1
    )
    refused = client.post(exchange.target, json=exchange.body)
    assert refused.status_code == 400
    assert "Invalid `signature` in `thinking` block" in error_message(refused)
    body = json.loads(json.dumps(exchange.body))
    for message in body["messages"]:
        if isinstance(message["content"], list):
            message["content"] = [b for b in message["content"] if b.get("type") != "thinking"]
    body.pop("thinking", None)
    accepted = client.post(exchange.target, json=body)
    assert accepted.status_code == 200, accepted.text


# Refused by the service for a reason the simulator does not model: o1-mini takes no `system` message.
MODEL_SPECIFIC = {"cassettes/test_openai/test_openai_o1_mini_system_role[system].yaml#0"}


def test_what_the_services_refused_is_refused(client: httpx.Client) -> None:
    """A recorded 400 is a 400 here too, in the same words unless the simulator already stops at a signature
    it cannot verify."""
    refused = [e for e in exchanges() if e.generation and e.status == 400 and e.name not in MODEL_SPECIFIC]
    assert refused
    for exchange in refused:
        response = client.post(exchange.target, json=exchange.body)
        assert response.status_code == 400, exchange.name
        recorded = exchange.answer["error"]["message"]
        ours = error_message(response)
        assert ours == recorded or any(w in ours for w in UNVERIFIABLE[exchange.api]), (exchange.name, ours)
