"""Every engine against a server that misbehaves on a real loopback socket: a stream dripped a few bytes at
a time, cut after N bytes, stalled past the read timeout, led by one huge event, or refused with 429/503
before it is served and with 500s until retries run out. Each ends in the answer or in one clear error, and
the same session then answers the next prompt."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import geppetto as gp
from conftest import ANSWER, PROVIDERS, MisbehavingServer, Script
from geppetto.profiles import ENGINE_CLASSES
from geppetto.providers._http import HttpTransport, RetryPolicy
from geppetto.providers._http_errors import anthropic_error_info, gemini_error_info, openai_error_info

RETRY = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.05)
TIMEOUT = httpx.Timeout(10.0, read=3.0)
LABEL = {"openai-responses": "openai", "openai-chat": "openai_chat", "anthropic": "anthropic", "gemini": "gemini"}


def _engine(provider: str, server: MisbehavingServer, **options: Any) -> Any:
    import importlib

    module, name = ENGINE_CLASSES[provider]
    cls = getattr(importlib.import_module(module), name)
    options.setdefault("retry", RETRY)
    options.setdefault("timeout", TIMEOUT)
    return cls(model="sim-1", api_key="sk-sim", base_url=server.url(provider), **options)


async def _answers(session: gp.Session, server: MisbehavingServer, body: bytes) -> None:
    """The same session answers the next prompt once the server behaves."""
    server.script = Script(body=body)
    out = await session.run("Again?")
    assert out.blocks[-1].text == ANSWER
    assert out.blocks[-1].kind is gp.BlockKind.LLM_TEXT


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_dripped_a_few_bytes_at_a_time_arrives_whole(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    bad_server.script = Script(mode="drip", body=recorded_streams[provider])
    async with _engine(provider, bad_server) as engine:
        out = await gp.Session(engine).run("Hi")
    assert out.blocks[-1].text == ANSWER


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_cut_after_n_bytes_is_one_stream_error(
    provider: str, cut: float, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(mode="drop", drop_after=int(len(body) * cut), body=body)
    async with _engine(provider, bad_server) as engine:
        session = gp.Session(engine)
        with pytest.raises(gp.StreamError) as err:
            await session.run("Hi")
        assert str(err.value).startswith(f"[{LABEL[provider]}] ")
        assert len(session.history) == 1  # the prompt's seed: nothing half-saved
        await _answers(session, bad_server, body)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_that_stalls_ends_with_the_read_timeout_named(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(mode="stall", body=body)
    async with _engine(provider, bad_server) as engine:
        session = gp.Session(engine)
        with pytest.raises(gp.StreamError, match=r"broke off after [\d.]+ s: no data for 3 s \(read timeout\)"):
            await session.run("Hi")
        await _answers(session, bad_server, body)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_one_huge_event_passes_under_the_bound_and_is_refused_over_it(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(mode="huge", huge_bytes=3 << 20, body=body)
    async with _engine(provider, bad_server) as engine:
        out = await gp.Session(engine).run("Hi")  # 3 MiB is well under the default bound
    assert out.blocks[-1].text == ANSWER
    parser = {"anthropic": anthropic_error_info, "gemini": gemini_error_info}.get(provider, openai_error_info)
    transport = HttpTransport(
        bad_server.url(provider), provider=LABEL[provider], error_parser=parser, retry=RETRY, max_event_size=1 << 20
    )
    bad_server.script = Script(mode="huge", huge_bytes=3 << 20, body=body)
    async with transport, _engine(provider, bad_server, http=transport) as engine:
        session = gp.Session(engine)
        with pytest.raises(gp.StreamError, match=r"grew past 1,048,576 characters \(max_event_size\)"):
            await session.run("Hi")
        await _answers(session, bad_server, body)


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_refusals_with_retry_after_are_retried_then_answered(
    provider: str, status: int, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    bad_server.script = Script(statuses=[status, status], body=recorded_streams[provider])
    async with _engine(provider, bad_server) as engine:
        out = await gp.Session(engine).run("Hi")
    assert out.blocks[-1].text == ANSWER
    assert len(bad_server.paths) == 3  # two refusals, then the answer


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_server_errors_past_the_retries_are_one_server_error(
    provider: str, bad_server: MisbehavingServer, recorded_streams: dict[str, bytes]
) -> None:
    body = recorded_streams[provider]
    bad_server.script = Script(statuses=[500, 500, 500], body=body)
    async with _engine(provider, bad_server) as engine:
        session = gp.Session(engine)
        with pytest.raises(gp.ServerError) as err:
            await session.run("Hi")
        assert err.value.status == 500
        assert len(bad_server.paths) == 3  # the first try and max_retries=2 retries
        await _answers(session, bad_server, body)
