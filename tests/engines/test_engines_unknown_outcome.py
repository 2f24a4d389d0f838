"""A stateless provider keeps nothing a client can read back, so a request whose connection broke after it
went out is sent again without proof it did not land: said in the log and counted
(``geppetto_requests_retried_unknown_outcome``); a request that never went out is sent again silently."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import geppetto as gp
from geppetto.providers._http import HttpTransport
from geppetto.providers._retry import RetryPolicy
from geppetto.providers.anthropic import ClaudeEngine
from geppetto.providers.gemini import GeminiEngine
from geppetto.providers.openai_chat import ChatEngine
from geppetto.providers.openai_responses import metrics
from geppetto.simulator import Reply, Simulator
from geppetto.turns import Block, Turn

FAST = RetryPolicy(max_retries=2, initial_delay=0.0)


class _Broken(httpx.AsyncBaseTransport):
    """The first POST fails with ``error``; ``delivered``: after the simulator answered it whole (the
    request landed), else before it reached the simulator."""

    def __init__(self, error: type[httpx.TransportError], delivered: bool) -> None:
        self.inner, self.error, self.delivered, self.failed = httpx.AsyncHTTPTransport(), error, delivered, False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or self.failed:
            return await self.inner.handle_async_request(request)
        self.failed = True
        if self.delivered:
            response = await self.inner.handle_async_request(request)
            await response.aread()
            await response.aclose()
        raise self.error("connection broke", request=request)


def chat(sim: Simulator, client: httpx.AsyncClient) -> gp.Engine:
    return ChatEngine("sim-1", "sk-test", sim.openai_url, retry=FAST, http=client)


def claude(sim: Simulator, client: httpx.AsyncClient) -> gp.Engine:
    return ClaudeEngine("sim-1", "sk-ant-test", sim.url, retry=FAST, http=client)


def gemini(sim: Simulator, client: httpx.AsyncClient) -> gp.Engine:
    return GeminiEngine("sim-1", "g-test", sim.url, retry=FAST, http=client)


ENGINES = [
    pytest.param(chat, "openai_chat", id="chat"),
    pytest.param(claude, "anthropic", id="claude"),
    pytest.param(gemini, "gemini", id="gemini"),
]


def _prometheus(provider: str) -> float:
    from prometheus_client import REGISTRY

    value = REGISTRY.get_sample_value("geppetto_requests_retried_unknown_outcome_total", {"provider": provider})
    return value or 0.0


@pytest.mark.parametrize(("make", "provider"), ENGINES)
async def test_a_stateless_retry_after_the_request_went_out_is_logged_and_counted(
    geppetto_sim: Simulator,
    caplog: pytest.LogCaptureFixture,
    make: Callable[[Simulator, httpx.AsyncClient], Any],
    provider: str,
) -> None:
    pytest.importorskip("prometheus_client")
    geppetto_sim.queue(Reply(text="first"), Reply(text="second"))
    before, exported = metrics.counters[f"retried_unknown:{provider}"], _prometheus(provider)
    async with httpx.AsyncClient(transport=_Broken(httpx.ReadError, delivered=True)) as client:
        eng = make(geppetto_sim, client)
        with caplog.at_level(logging.WARNING, "geppetto.providers"):
            turn = await eng.run_inference(Turn(blocks=[Block.user("hi")]))
    assert turn.blocks[-1].text == "second"  # the provider answered (and charged for) both
    assert len([r for r in geppetto_sim.requests if r.method == "POST"]) == 2
    assert "outcome of the first attempt unknown" in caplog.text
    assert metrics.counters[f"retried_unknown:{provider}"] == before + 1
    assert _prometheus(provider) == exported + 1


@pytest.mark.parametrize(("make", "provider"), ENGINES)
async def test_a_request_that_never_went_out_is_sent_again_without_a_count(
    geppetto_sim: Simulator,
    caplog: pytest.LogCaptureFixture,
    make: Callable[[Simulator, httpx.AsyncClient], Any],
    provider: str,
) -> None:
    geppetto_sim.queue(Reply(text="only"))
    before = metrics.counters[f"retried_unknown:{provider}"]
    async with httpx.AsyncClient(transport=_Broken(httpx.ConnectError, delivered=False)) as client:
        eng = make(geppetto_sim, client)
        with caplog.at_level(logging.WARNING, "geppetto.providers"):
            turn = await eng.run_inference(Turn(blocks=[Block.user("hi")]))
    assert turn.blocks[-1].text == "only"
    assert "outcome of the first attempt unknown" not in caplog.text
    assert metrics.counters[f"retried_unknown:{provider}"] == before


def _flaky_post() -> tuple[httpx.MockTransport, list[str]]:
    """Every first POST breaks after it went out (a reset); the next one is answered."""
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        if request.method == "POST" and seen.count("POST") == 1:
            raise httpx.ReadError("connection reset by peer", request=request)
        return httpx.Response(200, json={"ok": True})

    return httpx.MockTransport(handle), seen


@pytest.mark.parametrize(("says", "sent"), [(False, 2), (None, 2)])
async def test_the_transport_sends_again_only_what_did_not_provably_land(says: bool | None, sent: int) -> None:
    mock, seen = _flaky_post()
    http = HttpTransport("http://sim.test", provider="openai", transport=mock, retry=FAST)
    before = metrics.counters["retried_unknown:openai"]

    async def check() -> bool | None:
        return says

    assert await http.request_json("POST", "x", {}, landed=check) == {"ok": True}
    assert seen.count("POST") == sent
    assert metrics.counters["retried_unknown:openai"] == before + (1 if says is None else 0)


async def test_a_request_that_landed_is_not_sent_again_and_the_error_says_why() -> None:
    mock, seen = _flaky_post()
    http = HttpTransport("http://sim.test", provider="openai", transport=mock, retry=FAST)

    async def check() -> bool | None:
        return True

    with pytest.raises(gp.ProviderConnectionError, match="reached the server, which kept it, so it was not sent again"):
        await http.request_json("POST", "x", {}, landed=check)
    assert seen == ["POST"]


async def test_a_landed_check_that_fails_sends_nothing_again() -> None:
    mock, seen = _flaky_post()
    http = HttpTransport("http://sim.test", provider="openai", transport=mock, retry=FAST)

    async def check() -> bool | None:
        raise gp.ProviderError("GET conversations/c/items: 503")

    with pytest.raises(gp.ProviderConnectionError, match=r"could not be read .*so it was not sent again"):
        await http.request_json("POST", "x", {}, landed=check)
    assert seen == ["POST"]


async def test_a_get_is_sent_again_without_asking() -> None:
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        if len(seen) == 1:
            raise httpx.ReadError("connection reset by peer", request=request)
        return httpx.Response(200, json={"ok": True})

    http = HttpTransport("http://sim.test", provider="openai", transport=httpx.MockTransport(handle), retry=FAST)
    before = metrics.counters["retried_unknown:openai"]
    assert await http.get_json("x") == {"ok": True}
    assert seen == ["GET", "GET"] and metrics.counters["retried_unknown:openai"] == before
