"""``geppetto probe``'s requests and verdicts against the simulator, faithful and with the quirks of other
servers: the verdict is the one the engine reaches from the same evidence, and seeds an engine."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from responses_support import assert_valid_requests

import geppetto as gp
from geppetto.providers._http import HttpTransport
from geppetto.providers.openai_responses import ResponsesEngine, Verdict, endpoint_verdicts
from geppetto.providers.openai_responses._context import probe
from geppetto.simulator import Simulator, serve


def _quirky(*quirks: str) -> Any:
    return serve(quirks=list(quirks))


async def test_a_faithful_server_keeps_state_and_echoes_it(geppetto_sim: Simulator) -> None:
    report = await probe(geppetto_sim.openai_url, "sim-1", "sk-test")
    data = report.to_dict()
    assert (data["previous_response_id"], data["echo"], data["evidence"]) == ("kept", True, "echo")
    assert data["echo_seen"] == "exact"
    assert data["conversations"] and data["input_tokens"] and data["compact"]
    assert data["store_default"] is True and data["background"] is True and data["retrieve"] is True
    assert data["delete"] is True
    # what it stored is gone again, and every body it sent follows the spec
    assert_valid_requests(geppetto_sim)
    assert not geppetto_sim.state.responses
    assert data["requests"] == len(geppetto_sim.requests)


@pytest.mark.parametrize(
    ("quirks", "verdict", "evidence", "echo_seen"),
    [
        (("forgets",), "ignored", "usage", "null"),
        (("no-echo",), "kept", "usage", "missing"),
        (("null-echo",), "kept", "usage", "null"),
        (("foreign-echo",), "kept", "usage", "other"),
        (("no-echo", "forgets"), "ignored", "usage", "missing"),
        (("no-conversations",), "kept", "echo", "exact"),
        (("no-echo", "no-conversations", "detail-errors", "done-marker"), "kept", "usage", "missing"),
    ],
)
async def test_the_verdict_on_a_server_with_quirks(
    quirks: tuple[str, ...], verdict: str, evidence: str, echo_seen: str
) -> None:
    with _quirky(*quirks) as sim:
        report = await probe(sim.openai_url, "sim-1", "sk-test")
    data = report.to_dict()
    assert (data["previous_response_id"], data["evidence"], data["echo_seen"]) == (verdict, evidence, echo_seen)
    assert data["echo"] is (echo_seen == "exact")
    assert data["conversations"] is ("no-conversations" not in quirks)
    if "no-conversations" in quirks:
        assert any(note.startswith("POST /conversations: 404") for note in data["notes"])


async def test_without_usage_or_echo_the_verdict_is_unknown_not_ignored() -> None:
    # a server that used the history and one that forgot it look the same here: nothing is concluded
    for quirks in (("no-echo", "no-usage"), ("forgets", "no-usage")):
        with _quirky(*quirks) as sim:
            report = await probe(sim.openai_url, "sim-1", "sk-test")
        assert report.verdict.previous_response_id == "unknown", quirks
        assert "no usage" in report.verdict.detail


def _refusing(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content) if request.content else {}
    if request.url.path.endswith("/responses") and body.get("previous_response_id"):
        return httpx.Response(
            400,
            json={"error": {"message": "previous_response_id is not supported", "type": "invalid_request_error"}},
        )
    if request.url.path.endswith("/responses") and request.method == "POST":
        return httpx.Response(200, json={"id": "resp_1", "object": "response", "status": "completed", "output": []})
    return httpx.Response(404, json={"error": {"message": "Not Found", "type": "not_found"}})


async def test_a_server_that_refuses_previous_response_id_is_rejected() -> None:
    transport = HttpTransport("http://peer.test/v1", provider="openai", transport=httpx.MockTransport(_refusing))
    report = await probe("http://peer.test/v1", "m", "k", transport=transport)
    assert (report.verdict.previous_response_id, report.verdict.evidence) == ("rejected", "error")
    assert report.verdict.ignored  # an engine seeded with it sends whole Turns
    assert "previous_response_id is not supported" in report.verdict.detail
    assert not (report.input_tokens or report.compact or report.conversations or report.retrieve)


async def test_a_server_that_cannot_chain_on_its_own_ids_is_rejected_and_a_rate_limit_is_not() -> None:
    # store: true accepted and an id returned, but chaining on it is "not found"
    def answer(status: int, message: str) -> Any:
        def handler(request: httpx.Request) -> httpx.Response:
            body = json.loads(request.content) if request.content else {}
            if request.url.path.endswith("/responses") and body.get("previous_response_id"):
                return httpx.Response(status, json={"error": {"message": message, "type": "not_found_error"}})
            return _refusing(request)

        return handler

    found = {}
    for status, message in ((404, "Response resp_1 not found"), (429, "Too many requests")):
        mock = httpx.MockTransport(answer(status, message))
        transport = HttpTransport("http://peer.test/v1", provider="openai", transport=mock, sleep=_no_sleep)
        found[status] = (await probe("http://peer.test/v1", "m", "k", transport=transport)).verdict
    assert (found[404].previous_response_id, found[404].evidence) == ("rejected", "probe")
    assert "404: Response resp_1 not found" in found[404].detail
    assert found[429].previous_response_id == "unknown"


async def _no_sleep(seconds: float) -> None:
    return None


async def test_an_endpoint_that_answers_no_response_is_an_error_naming_it() -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"object": "list", "data": []})

    transport = HttpTransport("http://peer.test/v1", provider="openai", transport=httpx.MockTransport(broken))
    with pytest.raises(gp.ProviderError, match=r"http://peer.test/v1/responses answered without a response id"):
        await probe("http://peer.test/v1", "m", "k", transport=transport)


async def test_a_probe_verdict_seeds_an_engine_that_then_stays_stateless() -> None:
    with _quirky("forgets") as sim:
        data = json.loads(json.dumps((await probe(sim.openai_url, "sim-1", "sk-test")).to_dict()))
        endpoint_verdicts.clear()
        engine = ResponsesEngine(
            "sim-1",
            api_key="sk-test",
            base_url=sim.openai_url,
            mode="chained",
            endpoint_verdict=Verdict.from_dict(data),
        )
        sim.reset()
        session = gp.Session(engine)
        for i in range(3):
            await session.run(f"prompt {i}")
        posts = [r for r in sim.requests if r.path == "/v1/responses"]
    # no chained request was tried: the seeded verdict made every request whole from the start
    assert [len(p.body["input"]) for p in posts] == [1, 3, 5]
    assert not any("previous_response_id" in p.body for p in posts)
